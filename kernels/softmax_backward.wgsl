// Softmax input gradient from its output: out = y · (dy - Σ_row(dy · y)).
// One workgroup per row on a 2-D grid.

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> Y: array<f32>;
@group(0) @binding(2) var<storage, read> DY: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;

//#include _rows.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  var d = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    d += Y[base + j] * DY[base + j];
  }
  let dot = allSum(d, lid);
  for (var j = lid; j < p.cols; j += WG) {
    O[base + j] = Y[base + j] * (DY[base + j] - dot);
  }
}
