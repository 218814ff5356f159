// RMS norm forward over the last dimension, one workgroup per row on a 2-D
// grid: rstd = 1 / sqrt(mean(x²) + eps), y = x · rstd · w.

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

//#include _rows.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  var ss = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    let v = X[base + j];
    ss += v * v;
  }
  let rs = 1.0 / sqrt(allSum(ss, lid) / f32(p.cols) + p.eps);
  if (lid == 0u) {
    RSTD[row] = rs;
  }
  for (var j = lid; j < p.cols; j += WG) {
    Y[base + j] = X[base + j] * rs * W[j];
  }
}
