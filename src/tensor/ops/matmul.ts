/**
 * Batched matrix products.
 *
 * @module
 */

import { checkBool, checkRank, checkTensors, describe, fmtShape, sameShape } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/** Options of {@linkcode matmul}. */
export interface MatmulOptions {
  /** Use the transpose of the last two dimensions of `a`. */
  readonly transA?: boolean;
  /** Use the transpose of the last two dimensions of `b`. */
  readonly transB?: boolean;
}

/**
 * Batched matrix product. `a` is `[...batch, M, K]` (`[...batch, K, M]` with
 * `transA`), `b` is `[...batch, K, N]` (`[...batch, N, K]` with `transB`) or
 * 2-D and shared by every batch entry. Returns `[...batch, M, N]`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * const c = ops.matmul(a, a, { transB: true }); // [2, 2]
 * console.log(await c.toArray()); // Float32Array [14, 32, 32, 77]
 * ```
 */
export function matmul(a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  const op = "matmul";
  const be = checkTensors(op, { a, b });
  if (opts === null || typeof opts !== "object") {
    throw new TypeError(`${op}: opts must be an object, got ${describe(opts)}`);
  }
  const transA = checkBool(op, "transA", opts.transA);
  const transB = checkBool(op, "transB", opts.transB);
  checkRank(op, "a", a, 2);
  checkRank(op, "b", b, 2);
  const ar = a.shape.length, br = b.shape.length;
  const kA = transA ? a.shape[ar - 2] : a.shape[ar - 1];
  const kB = transB ? b.shape[br - 1] : b.shape[br - 2];
  const what = `a ${fmtShape(a.shape)} (transA=${transA}) vs b ${
    fmtShape(b.shape)
  } (transB=${transB})`;
  if (br !== 2 && !sameShape(a.shape.slice(0, -2), b.shape.slice(0, -2))) {
    throw new RangeError(
      `${op}: batch dimensions differ (b must be 2-D or have a's batch dimensions): ${what}`,
    );
  }
  if (kA !== kB) throw new RangeError(`${op}: inner dimensions differ: ${what}`);
  return be.matmul(a, b, transA, transB);
}
