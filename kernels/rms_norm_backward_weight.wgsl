// RMS norm weight gradient (the W pass), first stage: for a chunk of CHUNK
// rows (workgroup y) and one column per invocation (x),
//   partial[chunk, c] = Σ dy · x · rstd.
// The host then sums the partial rows with sum_rows.wgsl.

const WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
  chunk: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> DY: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read> RSTD: array<f32>;
@group(0) @binding(4) var<storage, read_write> PARTIAL: array<f32>;

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let c = gid.x;
  if (c >= p.cols) {
    return;
  }
  let r0 = wid.y * p.chunk;
  let r1 = min(r0 + p.chunk, p.rows);
  var dw = 0.0;
  for (var r = r0; r < r1; r++) {
    dw += DY[r * p.cols + c] * X[r * p.cols + c] * RSTD[r];
  }
  PARTIAL[wid.y * p.cols + c] = dw;
}
