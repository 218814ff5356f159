/**
 * Reductions: column sums, sums and sums of squares.
 *
 * @module
 */

import { checkRank, checkTensors } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * Sum over all rows: `[..., N]` → `[N]` (bias gradients).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * console.log(await ops.sumRows(x).toArray()); // Float32Array [4, 6]
 * ```
 */
export function sumRows(x: Tensor): Tensor {
  const be = checkTensors("sumRows", { x });
  checkRank("sumRows", "x", x, 1);
  return be.sumRows(x);
}

/**
 * Sum of all elements, shape `[1]`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3]), [3]);
 * console.log(await ops.sum(x).toArray()); // Float32Array [6]
 * ```
 */
export function sum(x: Tensor): Tensor {
  return checkTensors("sum", { x }).sum(x);
}

/**
 * Sum of squares of all elements, shape `[1]` (global-norm clipping).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.sumSquares(x).toArray()); // Float32Array [5]
 * ```
 */
export function sumSquares(x: Tensor): Tensor {
  return checkTensors("sumSquares", { x }).sumSquares(x);
}
