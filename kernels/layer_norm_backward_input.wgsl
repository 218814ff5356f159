// Layer norm input gradient (the I pass), one workgroup per row on a 2-D
// grid. With g = dy · gamma and x̂ = (x - mean) · rstd:
// dx = rstd · (g - mean_row(g) - x̂ · mean_row(g · x̂)).

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> DY: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read> MEAN: array<f32>;
@group(0) @binding(4) var<storage, read> RSTD: array<f32>;
@group(0) @binding(5) var<storage, read> GAMMA: array<f32>;
@group(0) @binding(6) var<storage, read_write> O: array<f32>;

//#include _rows.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  let n = f32(p.cols);
  let mu = MEAN[row];
  let rs = RSTD[row];
  var sg = 0.0;
  var sgx = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    let g = DY[base + j] * GAMMA[j];
    sg += g;
    sgx += g * (X[base + j] - mu) * rs;
  }
  let mg = allSum(sg, lid) / n;
  let mgx = allSum(sgx, lid) / n;
  for (var j = lid; j < p.cols; j += WG) {
    let xh = (X[base + j] - mu) * rs;
    O[base + j] = rs * (DY[base + j] * GAMMA[j] - mg - xh * mgx);
  }
}
