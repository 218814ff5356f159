/**
 * CPU loops of the layout ops: the axis permutation, the embedding's row
 * gather and its gradient's scatter-add.
 *
 * @module
 */

import type { Shape } from "../backend.ts";

/** `O` (shape `perm.map(p => shape[p])`) becomes the permutation of `X` (shape `shape`). */
export function permuteInto(
  X: Float32Array,
  shape: Shape,
  perm: readonly number[],
  O: Float32Array,
): void {
  const rank = shape.length;
  const outShape = perm.map((p) => shape[p]);
  if (O.length === 0) return;
  if (rank === 0) {
    O[0] = X[0];
    return;
  }
  const inStrides = new Array<number>(rank);
  let s = 1;
  for (let d = rank - 1; d >= 0; d--) {
    inStrides[d] = s;
    s *= shape[d];
  }
  // Input stride of each output axis; the innermost output axis runs in a tight loop.
  const st = perm.map((p) => inStrides[p]);
  const last = rank - 1, nLast = outShape[last], sLast = st[last];
  const idx = new Array<number>(rank).fill(0);
  let src = 0;
  for (let o = 0; o < O.length; o += nLast) {
    let k = src;
    for (let j = 0; j < nLast; j++, k += sLast) O[o + j] = X[k];
    // Odometer over the outer output axes.
    for (let d = last - 1; d >= 0; d--) {
      idx[d]++;
      src += st[d];
      if (idx[d] < outShape[d]) break;
      src -= st[d] * outShape[d];
      idx[d] = 0;
    }
  }
}

/** Row gather: row i of `O` is row `I[i]` of the table `Tb` (rows of `C`). */
export function embeddingInto(Tb: Float32Array, I: Float32Array, C: number, O: Float32Array): void {
  for (let i = 0; i < I.length; i++) O.set(Tb.subarray(I[i] * C, I[i] * C + C), i * C);
}

/** Scatter-add: row `I[i]` of `D` (rows of `C`) gains row i of `G`, in order of i. */
export function embeddingBackwardInto(
  D: Float32Array,
  I: Float32Array,
  G: Float32Array,
  C: number,
): void {
  for (let i = 0; i < I.length; i++) {
    const o = I[i] * C, g = i * C;
    for (let j = 0; j < C; j++) D[o + j] += G[g + j];
  }
}
