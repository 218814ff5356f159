// Batched strided 2-D copy with zero padding or cropping: out is
// [batch, rows, cols] (contiguous) and
//   out[b, r, c] = in[b·inStride + r·rowStride + c·colStride]
// when r < inRows and c < inCols, else 0. The matmul host uses it to pad
// operands to multiples of 4, to transpose them (colStride ≠ 1), and to crop
// padded results. One element per invocation on a 2-D grid.

struct Params {
  n: u32,
  rows: u32,
  cols: u32,
  inRows: u32,
  inCols: u32,
  rowStride: u32,
  colStride: u32,
  inStride: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

//#include _units.wgsl

fn unitMain(i: u32) {
  let c = i % p.cols;
  let r = (i / p.cols) % p.rows;
  let b = i / (p.cols * p.rows);
  var v = 0.0;
  if (r < p.inRows && c < p.inCols) {
    v = X[b * p.inStride + r * p.rowStride + c * p.colStride];
  }
  O[i] = v;
}
