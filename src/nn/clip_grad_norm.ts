/**
 * Clipping by the global gradient norm.
 *
 * @module
 */

import * as ops from "../tensor/ops.ts";
import type { Parameter } from "./layer.ts";

/**
 * Computes the global L2 norm of all gradients, `√Σ_params Σ g²` (summed
 * in f64 from one read-back), and when it exceeds `maxNorm` scales every
 * gradient in place by `maxNorm / (norm + 1e-6)`, as PyTorch's
 * `clip_grad_norm_`. Returns the norm before clipping. Parameters may live on
 * different backends.
 *
 * @example
 * ```ts
 * import { clipGradNorm, CpuBackend, Linear } from "@conveyor/core";
 * const be = new CpuBackend();
 * const lin = new Linear(be, 2, 2, { seed: 0 });
 * const norm = await clipGradNorm(lin.parameters(), 1.0);
 * console.log(norm); // 0: no gradient accumulated yet
 * lin.dispose();
 * ```
 */
export async function clipGradNorm(
  params: readonly Parameter[],
  maxNorm: number,
): Promise<number> {
  if (typeof maxNorm !== "number" || !(maxNorm > 0) || !Number.isFinite(maxNorm)) {
    throw new RangeError(`clipGradNorm: maxNorm must be a finite positive number, got ${maxNorm}`);
  }
  if (!Array.isArray(params)) {
    throw new TypeError(`clipGradNorm: params must be an array, got ${String(params)}`);
  }
  if (params.length === 0) return 0;
  // One read per backend: per-parameter sums concatenated there.
  const byBackend = new Map<unknown, Parameter[]>();
  for (const p of params) {
    const list = byBackend.get(p.grad.backend) ?? [];
    list.push(p);
    byBackend.set(p.grad.backend, list);
  }
  const reads = [...byBackend.values()].map((list) => {
    const sums = list.map((p) => ops.sumSquares(p.grad)); // each [1]
    const all = ops.concatRows(sums); // [P]
    for (const s of sums) s.dispose();
    return all.toArray().finally(() => all.dispose());
  });
  let total = 0;
  for (const arr of await Promise.all(reads)) for (const v of arr) total += v;
  const norm = Math.sqrt(total);
  if (norm > maxNorm) {
    const c = maxNorm / (norm + 1e-6);
    for (const p of params) {
      // No in-place scale op: g ← 0 + 1·(c g), which is exact.
      const scaled = ops.scale(p.grad, c);
      ops.fillInPlace(p.grad, 0);
      ops.axpyInPlace(p.grad, 1, scaled);
      scaled.dispose();
    }
  }
  return norm;
}
