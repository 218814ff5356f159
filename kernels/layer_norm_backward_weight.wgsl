// Layer norm weight gradients (the W pass), first stage: for a chunk of
// CHUNK rows (workgroup y) and one column per invocation (x),
//   partial[chunk, c]        = Σ dy · (x - mean) · rstd   (dgamma)
//   partial[chunk, cols + c] = Σ dy                       (dbeta)
// The host then sums the partial rows with sum_rows.wgsl.

// Params (rows, cols, chunk) at binding 0 and the entry point:
//#include _column_chunks.wgsl

@group(0) @binding(1) var<storage, read> DY: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read> MEAN: array<f32>;
@group(0) @binding(4) var<storage, read> RSTD: array<f32>;
@group(0) @binding(5) var<storage, read_write> PARTIAL: array<f32>;

fn columnMain(c: u32, k: u32, r0: u32, r1: u32) {
  var dg = 0.0;
  var db = 0.0;
  for (var r = r0; r < r1; r++) {
    let g = DY[r * p.cols + c];
    dg += g * (X[r * p.cols + c] - MEAN[r]) * RSTD[r];
    db += g;
  }
  PARTIAL[k * 2u * p.cols + c] = dg;
  PARTIAL[k * 2u * p.cols + p.cols + c] = db;
}
