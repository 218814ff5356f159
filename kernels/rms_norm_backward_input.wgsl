// RMS norm input gradient (the I pass), one workgroup per row on a 2-D
// grid. With g = dy · w and x̂ = x · rstd: dx = rstd · (g - x̂ · mean_row(g · x̂)).

const WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> DY: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read> RSTD: array<f32>;
@group(0) @binding(4) var<storage, read> W: array<f32>;
@group(0) @binding(5) var<storage, read_write> O: array<f32>;

//#include _row_reduce.wgsl

@compute @workgroup_size(WG)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let base = row * p.cols;
  let rs = RSTD[row];
  var sgx = 0.0;
  for (var j = lid.x; j < p.cols; j += WG) {
    sgx += DY[base + j] * W[j] * X[base + j] * rs;
  }
  let mgx = allSum(sgx, lid.x) / f32(p.cols);
  for (var j = lid.x; j < p.cols; j += WG) {
    O[base + j] = rs * (DY[base + j] * W[j] - X[base + j] * rs * mgx);
  }
}
