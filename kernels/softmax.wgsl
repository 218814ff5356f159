// Row softmax over the last dimension, one workgroup per row (rows laid out
// on a 2-D grid of workgroups). With CAUSAL the input is [..., T, T] and row
// r keeps columns j <= r mod T; the rest are exactly 0.

const CAUSAL: bool = false;

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

//#include _rows.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  var lim = p.cols;
  if (CAUSAL) {
    lim = row % p.cols + 1u;
  }
  var m = -3.4028234e38;
  for (var j = lid; j < lim; j += WG) {
    m = max(m, X[base + j]);
  }
  let mx = allMax(m, lid);
  var s = 0.0;
  for (var j = lid; j < lim; j += WG) {
    s += exp(X[base + j] - mx);
  }
  let inv = 1.0 / allSum(s, lid);
  for (var j = lid; j < p.cols; j += WG) {
    O[base + j] = select(0.0, exp(X[base + j] - mx) * inv, j < lim);
  }
}
