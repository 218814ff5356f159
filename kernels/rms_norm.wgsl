// RMS norm forward over the last dimension, one workgroup per row on a 2-D
// grid: rstd = 1 / sqrt(mean(x²) + eps), y = x · rstd · w.

const WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> W: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
@group(0) @binding(4) var<storage, read_write> RSTD: array<f32>;

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
  var ss = 0.0;
  for (var j = lid.x; j < p.cols; j += WG) {
    let v = X[base + j];
    ss += v * v;
  }
  let rs = 1.0 / sqrt(allSum(ss, lid.x) / f32(p.cols) + p.eps);
  if (lid.x == 0u) {
    RSTD[row] = rs;
  }
  for (var j = lid.x; j < p.cols; j += WG) {
    Y[base + j] = X[base + j] * rs * W[j];
  }
}
