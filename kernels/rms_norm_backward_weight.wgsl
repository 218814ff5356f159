// RMS norm weight gradient (the W pass), first stage: for a chunk of CHUNK
// rows (workgroup y) and one column per invocation (x),
//   partial[chunk, c] = Σ dy · x · rstd.
// The host then sums the partial rows with sum_rows.wgsl.

// Params (rows, cols, chunk) at binding 0 and the entry point:
//#include _column_chunks.wgsl

@group(0) @binding(1) var<storage, read> DY: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read> RSTD: array<f32>;
@group(0) @binding(4) var<storage, read_write> PARTIAL: array<f32>;

fn columnMain(c: u32, k: u32, r0: u32, r1: u32) {
  var dw = 0.0;
  for (var r = r0; r < r1; r++) {
    dw += DY[r * p.cols + c] * X[r * p.cols + c] * RSTD[r];
  }
  PARTIAL[k * p.cols + c] = dw;
}
