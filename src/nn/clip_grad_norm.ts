/**
 * Clipping by the global gradient norm.
 *
 * @module
 */

import * as ops from "../tensor/ops.ts";
import type { Parameter } from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/**
 * Sum of squares of all gradients, `Σ_params Σ g²`, summed in f64 from one
 * read-back per backend. A pipeline stage computes its part; the parts add
 * up to the square of the global norm.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { gradNormSquared } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const lin = new Linear(be, 2, 2, { seed: 0 });
 * console.log(await gradNormSquared(lin.parameters())); // 0
 * lin.dispose();
 * ```
 */
export async function gradNormSquared(params: readonly Parameter[]): Promise<number> {
  if (!Array.isArray(params)) {
    throw new TypeError(`gradNormSquared: params must be an array, got ${describeValue(params)}`);
  }
  if (params.length === 0) return 0;
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
  return total;
}

/**
 * Multiplies every gradient by `factor` in place.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { scaleGradsInPlace } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const lin = new Linear(be, 2, 2, { seed: 0 });
 * scaleGradsInPlace(lin.parameters(), 0.5);
 * lin.dispose();
 * ```
 */
export function scaleGradsInPlace(params: readonly Parameter[], factor: number): void {
  if (typeof factor !== "number" || !Number.isFinite(factor)) {
    throw new RangeError(
      `scaleGradsInPlace: factor must be a finite number, got ${describeValue(factor)}`,
    );
  }
  for (const p of params) ops.scaleInPlace(p.grad, factor);
}

/**
 * Computes the global L2 norm of all gradients, `√Σ_params Σ g²` (summed
 * in f64 from one read-back per backend), and when it exceeds `maxNorm`
 * scales every gradient in place by `maxNorm / (norm + 1e-6)`, as PyTorch's
 * `clip_grad_norm_`. Returns the norm before clipping. Parameters may live on
 * different backends. (Across pipeline stages: add the stages'
 * {@linkcode gradNormSquared}, then {@linkcode scaleGradsInPlace} each.)
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { clipGradNorm } from "@conveyor/core/nn";
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
    throw new RangeError(
      `clipGradNorm: maxNorm must be a finite positive number, got ${describeValue(maxNorm)}`,
    );
  }
  const norm = Math.sqrt(await gradNormSquared(params));
  if (norm > maxNorm) scaleGradsInPlace(params, maxNorm / (norm + 1e-6));
  return norm;
}
