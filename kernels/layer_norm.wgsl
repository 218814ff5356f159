// Layer norm forward over the last dimension, one workgroup per row on a 2-D
// grid: mean, rstd = 1 / sqrt(var + eps) (two-pass variance), and
// y = (x - mean) · rstd · gamma + beta.

struct Params {
  rows: u32,
  cols: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> GAMMA: array<f32>;
@group(0) @binding(3) var<storage, read> BETA: array<f32>;
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
@group(0) @binding(5) var<storage, read_write> MEAN: array<f32>;
@group(0) @binding(6) var<storage, read_write> RSTD: array<f32>;

//#include _rows.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  let n = f32(p.cols);
  var s = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    s += X[base + j];
  }
  let mu = allSum(s, lid) / n;
  var v = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    let d = X[base + j] - mu;
    v += d * d;
  }
  let rs = 1.0 / sqrt(allSum(v, lid) / n + p.eps);
  if (lid == 0u) {
    MEAN[row] = mu;
    RSTD[row] = rs;
  }
  for (var j = lid; j < p.cols; j += WG) {
    Y[base + j] = (X[base + j] - mu) * rs * GAMMA[j] + BETA[j];
  }
}
