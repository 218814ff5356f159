/**
 * CPU reference of the elementwise families: unary ops and their
 * gradients, broadcasting binary ops, `where`, and `sumToShape` (the sum
 * over broadcast axes a broadcast operand's gradient needs). Formulas come
 * from `_elementwise_ops.ts`; a NaN operand gives NaN.
 *
 * @module
 */

import type { Shape } from "../backend.ts";
import { broadcastPlan } from "../_broadcast.ts";
import {
  BINARY_OPS,
  type BinaryOp,
  UNARY_GRAD_OPS,
  UNARY_OPS,
  type UnaryGradOp,
  type UnaryOp,
} from "../_elementwise_ops.ts";
import { dropoutHash } from "../_dropout_hash.ts";
import { shapeSize } from "../tensor.ts";

/** `O[r][j] = X[r][j] + Bv[j]` over `rows` rows of `n`. */
export function addBiasInto(
  X: Float32Array,
  Bv: Float32Array,
  rows: number,
  n: number,
  O: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    for (let j = 0; j < n; j++) O[o + j] = X[o + j] + Bv[j];
  }
}

/** `O[i] = f(X[i])`, NaN kept. */
export function unaryInto(op: UnaryOp, X: Float32Array, O: Float32Array): void {
  const f = UNARY_OPS[op].cpu;
  for (let i = 0; i < O.length; i++) {
    const x = X[i];
    O[i] = x !== x ? x : f(x);
  }
}

/** `O[i] = dy · f'(V[i])`, NaN when either operand is NaN. */
export function unaryBackwardInto(
  op: UnaryGradOp,
  V: Float32Array,
  G: Float32Array,
  O: Float32Array,
): void {
  const f = UNARY_GRAD_OPS[op].cpu;
  for (let i = 0; i < O.length; i++) {
    const v = V[i], g = G[i];
    O[i] = v !== v || g !== g ? v + g : f(v, g);
  }
}

/**
 * Calls `body(o, offsets)` for each run of the innermost merged axis of a
 * broadcast to `out`: `o` is the output offset of the run, `offsets[k]` the
 * offset of input k, `len` its length and `steps[k]` input k's stride.
 */
function forEachRun(
  out: Shape,
  inputs: readonly Shape[],
  body: (o: number, offsets: number[], len: number, steps: number[]) => void,
): void {
  const n = shapeSize(out);
  if (n === 0) return;
  const { shape, strides } = broadcastPlan(out, inputs);
  const rank = shape.length;
  if (rank === 0) {
    body(0, inputs.map(() => 0), 1, inputs.map(() => 0));
    return;
  }
  const last = rank - 1, len = shape[last];
  const steps = strides.map((s) => s[last]);
  const idx = new Array<number>(rank).fill(0);
  const off = inputs.map(() => 0);
  for (let o = 0; o < n; o += len) {
    body(o, off, len, steps);
    for (let d = last - 1; d >= 0; d--) {
      idx[d]++;
      for (let k = 0; k < off.length; k++) off[k] += strides[k][d];
      if (idx[d] < shape[d]) break;
      for (let k = 0; k < off.length; k++) off[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
  }
}

/** An operand of a broadcasting op: its values and the shape they have. */
export interface Operand {
  /** The values, row-major. */
  readonly data: Float32Array;
  /** Their shape, broadcast to the output's. */
  readonly shape: Shape;
}

/** `O = A (op) B` with `A`, `B` broadcast to `out`. */
export function binaryInto(
  op: BinaryOp,
  a: Operand,
  b: Operand,
  out: Shape,
  O: Float32Array,
): void {
  const f = BINARY_OPS[op].cpu;
  const A = a.data, B = b.data;
  forEachRun(out, [a.shape, b.shape], (o, [ia, ib], len, [sa, sb]) => {
    for (let j = 0; j < len; j++, ia += sa, ib += sb) {
      const a = A[ia], b = B[ib];
      O[o + j] = a !== a || b !== b ? a + b : f(a, b);
    }
  });
}

/** `O = C ≠ 0 ? A : B` broadcast to `out` (a NaN condition counts as true). */
export function whereInto(c: Operand, a: Operand, b: Operand, out: Shape, O: Float32Array): void {
  const C = c.data, A = a.data, B = b.data;
  forEachRun(out, [c.shape, a.shape, b.shape], (o, [ic, ia, ib], len, [sc, sa, sb]) => {
    for (let j = 0; j < len; j++, ic += sc, ia += sa, ib += sb) {
      O[o + j] = C[ic] !== 0 ? A[ia] : B[ib];
    }
  });
}

/**
 * Sums `X` (shape `xShape`) over the axes where `shape` (right-aligned) has
 * extent 1, into `O` of `shape`; accumulated in f64.
 */
export function sumToShapeInto(
  X: Float32Array,
  xShape: Shape,
  shape: Shape,
  O: Float32Array,
): void {
  const acc = new Float64Array(O.length);
  // Walk x in order; each run adds into the output positions x maps to.
  forEachRun(xShape, [shape], (o, [io], len, [so]) => {
    for (let j = 0; j < len; j++, io += so) acc[io] += X[o + j];
  });
  O.set(acc);
}

/**
 * Dropout: `O[i] = X[i] · (kept ? scale : 0)` with the mask of
 * `_dropout_hash.ts` (a NaN input stays NaN, kept or not).
 */
export function dropoutInto(
  X: Float32Array,
  O: Float32Array,
  key: number,
  base: number,
  threshold: number,
  scale: number,
): void {
  for (let i = 0; i < O.length; i++) {
    const h = dropoutHash((base + i) >>> 0, key);
    O[i] = X[i] * (h >= threshold ? scale : 0);
  }
}
