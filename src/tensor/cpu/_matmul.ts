/**
 * CPU reference of the batched matmul.
 *
 * @module
 */

/**
 * `C[b] = op(A[b]) · op(B[b])` for `batch` entries of M×K by K×N (A read
 * transposed with `transA`, B with `transB`; `bShared`: one B for every
 * entry). Sums in f64, stored as f32.
 */
export function matmulInto(
  A: Float32Array,
  B: Float32Array,
  C: Float32Array,
  batch: number,
  M: number,
  K: number,
  N: number,
  transA: boolean,
  transB: boolean,
  bShared: boolean,
): void {
  const acc = new Float64Array(N);
  // Transposing b up front keeps the inner loop contiguous (i-k-j order).
  let Bt: Float32Array | null = null;
  for (let bi = 0; bi < batch; bi++) {
    const aOff = bi * M * K;
    let Bm: Float32Array, bOff: number;
    if (transB) {
      if (Bt === null || !bShared) {
        Bt = transpose2d(B, bShared ? 0 : bi * K * N, N, K, Bt);
      }
      Bm = Bt;
      bOff = 0;
    } else {
      Bm = B;
      bOff = bShared ? 0 : bi * K * N;
    }
    const cOff = bi * M * N;
    for (let i = 0; i < M; i++) {
      acc.fill(0);
      for (let k = 0; k < K; k++) {
        const aik = transA ? A[aOff + k * M + i] : A[aOff + i * K + k];
        const row = bOff + k * N;
        for (let j = 0; j < N; j++) acc[j] += aik * Bm[row + j];
      }
      C.set(acc, cOff + i * N);
    }
  }
}

/** `src` rows×cols (from offset) → a fresh or reused cols×rows matrix. */
function transpose2d(
  src: Float32Array,
  off: number,
  rows: number,
  cols: number,
  reuse: Float32Array | null,
): Float32Array {
  const t = reuse !== null && reuse.length === rows * cols ? reuse : new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) t[c * rows + r] = src[off + r * cols + c];
  }
  return t;
}
