// Row softmax over the last dimension, one workgroup per row (rows laid out
// on a 2-D grid of workgroups). With CAUSAL the input is [..., T, T] and row
// r keeps columns j <= r mod T; the rest are exactly 0.

const CAUSAL: bool = false;
const WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

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
  var lim = p.cols;
  if (CAUSAL) {
    lim = row % p.cols + 1u;
  }
  var m = -3.4028234e38;
  for (var j = lid.x; j < lim; j += WG) {
    m = max(m, X[base + j]);
  }
  let mx = allMax(m, lid.x);
  var s = 0.0;
  for (var j = lid.x; j < lim; j += WG) {
    s += exp(X[base + j] - mx);
  }
  let inv = 1.0 / allSum(s, lid.x);
  for (var j = lid.x; j < p.cols; j += WG) {
    O[base + j] = select(0.0, exp(X[base + j] - mx) * inv, j < lim);
  }
}
