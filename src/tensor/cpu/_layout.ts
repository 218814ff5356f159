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

/**
 * The permutation of a tensor of shape `shape` by `perm` as a strided copy:
 * the output's extents and, for each output axis, the input's stride;
 * axes of extent 1 dropped and neighbours that stay adjacent merged.
 */
export function permutePlan(
  shape: Shape,
  perm: readonly number[],
): { shape: number[]; strides: number[] } {
  const inStrides = new Array<number>(shape.length);
  let s = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    inStrides[d] = s;
    s *= shape[d];
  }
  const out: number[] = [], strides: number[] = [];
  for (const p of perm) {
    const e = shape[p], st = inStrides[p];
    if (e === 1) continue;
    const k = out.length - 1;
    if (k >= 0 && strides[k] === st * e) {
      out[k] *= e;
      strides[k] = st;
    } else {
      out.push(e);
      strides.push(st);
    }
  }
  if (out.length === 0 && shape.every((e) => e === 1)) return { shape: [1], strides: [1] };
  return { shape: out, strides };
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
