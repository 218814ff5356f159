// Column sums, one stage: for a chunk of CHUNK rows (workgroup y) and one
// column per invocation (x), out[chunk, c] = Σ_rows x[r, c]. The host repeats
// the stage on its output until one row is left.

const WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
  chunk: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

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
  var s = 0.0;
  for (var r = r0; r < r1; r++) {
    s += X[r * p.cols + c];
  }
  O[wid.y * p.cols + c] = s;
}
