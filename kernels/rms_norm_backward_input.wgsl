// RMS norm input gradient (the I pass), one workgroup per row on a 2-D
// grid. With g = dy · w and x̂ = x · rstd: dx = rstd · (g - x̂ · mean_row(g · x̂)).

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

//#include _rows.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  let rs = RSTD[row];
  var sgx = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    sgx += DY[base + j] * W[j] * X[base + j] * rs;
  }
  let mgx = allSum(sgx, lid) / f32(p.cols);
  for (var j = lid; j < p.cols; j += WG) {
    O[base + j] = rs * (DY[base + j] * W[j] - X[base + j] * rs * mgx);
  }
}
