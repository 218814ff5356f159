/**
 * NumPy-style broadcasting shared by the ops (shape rules) and both
 * backends (index plans).
 *
 * Shapes are aligned on the right; two dimensions are compatible when they
 * are equal or one of them is 1, and the result takes the larger. A plan
 * drops the output axes of extent 1 and merges neighbouring axes that every
 * operand walks contiguously (or not at all), so `[B, T, C]` against `[C]`
 * runs as a `[B·T, C]` loop with strides `[C, 1]` and `[0, 1]`.
 *
 * @module
 */

import type { Shape } from "./backend.ts";

/** The broadcast of `shapes`, or a description of the first conflict. */
export function broadcastShapes(
  shapes: readonly Shape[],
): { shape: number[] } | { axis: number; extents: number[] } {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (let d = 1; d <= rank; d++) {
    let ext = 1;
    for (const s of shapes) {
      const e = s.length - d >= 0 ? s[s.length - d] : 1;
      if (e === 1) continue;
      if (ext !== 1 && e !== ext) {
        return { axis: -d, extents: shapes.map((t) => (t.length - d >= 0 ? t[t.length - d] : 1)) };
      }
      ext = e;
    }
    out[rank - d] = ext;
  }
  return { shape: out };
}

/** Merged loop axes and, per operand, the input stride along each (0 when broadcast). */
export interface BroadcastPlan {
  /** Extents of the merged axes, outermost first (empty for one element). */
  readonly shape: number[];
  /** One stride list per operand, aligned with `shape`. */
  readonly strides: number[][];
}

/** The index plan of `inputs` broadcast to `out` (which they must broadcast to). */
export function broadcastPlan(out: Shape, inputs: readonly Shape[]): BroadcastPlan {
  const rank = out.length;
  const shape: number[] = [];
  const strides: number[][] = inputs.map(() => []);
  // Contiguous strides of each input, right-aligned to the output.
  const own = inputs.map((s) => {
    const st = new Array<number>(rank).fill(0);
    let acc = 1;
    for (let d = 1; d <= s.length; d++) {
      const e = s[s.length - d];
      st[rank - d] = e === 1 ? 0 : acc;
      acc *= e;
    }
    return st;
  });
  for (let d = 0; d < rank; d++) {
    const ext = out[d];
    if (ext === 1) continue;
    const last = shape.length - 1;
    if (last >= 0 && own.every((st, k) => strides[k][last] === st[d] * ext)) {
      // The previous axis steps exactly over this one for every operand: merge.
      shape[last] *= ext;
      own.forEach((st, k) => (strides[k][last] = st[d]));
    } else {
      shape.push(ext);
      own.forEach((st, k) => strides[k].push(st[d]));
    }
  }
  return { shape, strides };
}
