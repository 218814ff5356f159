// Column sums, one stage: for a chunk of CHUNK rows (workgroup y) and one
// column per invocation (x), out[chunk, c] = Σ_rows x[r, c]. The host repeats
// the stage on its output until one row is left.

// Params (rows, cols, chunk) at binding 0 and the entry point:
//#include _column_chunks.wgsl

@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

fn columnMain(c: u32, k: u32, r0: u32, r1: u32) {
  var s = 0.0;
  for (var r = r0; r < r1; r++) {
    s += X[r * p.cols + c];
  }
  O[k * p.cols + c] = s;
}
