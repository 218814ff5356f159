/**
 * CPU reference of the batched matmul.
 *
 * @module
 */

/**
 * `C[b] = op(A[b]) · op(B[b])` for `batch` entries of M×K by K×N (A read
 * transposed with `transA`, B with `transB`; `bShared`: one B for every
 * entry). Each output sums its K products in order, in f64, and is stored
 * as f32.
 *
 * The work is cut into 4×4 tiles of C: a tile's 16 sums live in local
 * variables (f64, in registers) while k runs, so each loaded element of A
 * and B serves four products instead of one. That is about 2–3× faster
 * than one output row at a time, and gives the same bits, since every sum
 * still adds the same products in the same order. The rows and columns
 * past the last full tile are summed one output at a time.
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
  // op(A)[i][k] = A[i * ai + k * ak], op(B)[k][j] = B[k * bk + j * bj].
  const ai = transA ? 1 : K, ak = transA ? M : 1;
  const bk = transB ? 1 : N, bj = transB ? K : 1;
  const M4 = M - M % 4, N4 = N - N % 4;
  for (let e = 0; e < batch; e++) {
    const aOff = e * M * K, bOff = bShared ? 0 : e * K * N, cOff = e * M * N;
    for (let i = 0; i < M4; i += 4) {
      for (let j = 0; j < N4; j += 4) {
        let c00 = 0, c01 = 0, c02 = 0, c03 = 0;
        let c10 = 0, c11 = 0, c12 = 0, c13 = 0;
        let c20 = 0, c21 = 0, c22 = 0, c23 = 0;
        let c30 = 0, c31 = 0, c32 = 0, c33 = 0;
        let pa = aOff + i * ai, pb = bOff + j * bj;
        for (let k = 0; k < K; k++, pa += ak, pb += bk) {
          const a0 = A[pa], a1 = A[pa + ai], a2 = A[pa + 2 * ai], a3 = A[pa + 3 * ai];
          const b0 = B[pb], b1 = B[pb + bj], b2 = B[pb + 2 * bj], b3 = B[pb + 3 * bj];
          c00 += a0 * b0, c01 += a0 * b1, c02 += a0 * b2, c03 += a0 * b3;
          c10 += a1 * b0, c11 += a1 * b1, c12 += a1 * b2, c13 += a1 * b3;
          c20 += a2 * b0, c21 += a2 * b1, c22 += a2 * b2, c23 += a2 * b3;
          c30 += a3 * b0, c31 += a3 * b1, c32 += a3 * b2, c33 += a3 * b3;
        }
        const o0 = cOff + i * N + j, o1 = o0 + N, o2 = o1 + N, o3 = o2 + N;
        C[o0] = c00, C[o0 + 1] = c01, C[o0 + 2] = c02, C[o0 + 3] = c03;
        C[o1] = c10, C[o1 + 1] = c11, C[o1 + 2] = c12, C[o1 + 3] = c13;
        C[o2] = c20, C[o2 + 1] = c21, C[o2 + 2] = c22, C[o2 + 3] = c23;
        C[o3] = c30, C[o3 + 1] = c31, C[o3 + 2] = c32, C[o3 + 3] = c33;
      }
    }
    // The edges: columns N4.. of the tiled rows, then every column of rows M4...
    for (let i = 0; i < M; i++) {
      for (let j = i < M4 ? N4 : 0; j < N; j++) {
        let c = 0;
        let pa = aOff + i * ai, pb = bOff + j * bj;
        for (let k = 0; k < K; k++, pa += ak, pb += bk) c += A[pa] * B[pb];
        C[cOff + i * N + j] = c;
      }
    }
  }
}
