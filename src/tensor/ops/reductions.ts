/**
 * Reductions: column sums, sums, sums of squares, and the sum to a
 * broadcast shape.
 *
 * @module
 */

import type { Shape } from "../backend.ts";
import { broadcastShapes } from "../_broadcast.ts";
import { checkRank, checkShapeArg, checkTensors, fmtShape, sameShape } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * Sum over all rows: `[..., N]` → `[N]` (bias gradients).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
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
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
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
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.sumSquares(x).toArray()); // Float32Array [5]
 * ```
 */
export function sumSquares(x: Tensor): Tensor {
  return checkTensors("sumSquares", { x }).sumSquares(x);
}

/**
 * Sums `x` down to `shape`: over every leading axis `shape` lacks and every
 * axis where `shape` has extent 1 (shapes aligned on the right). This is
 * the gradient of an operand of shape `shape` that a broadcasting op
 * ({@linkcode add}, {@linkcode mul}, …) stretched to `x.shape`. `shape`
 * must broadcast to `x.shape`; a RangeError names both otherwise.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const dy = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * assert.deepEqual([...await ops.sumToShape(dy, [3]).toArray()], [5, 7, 9]);
 * assert.deepEqual([...await ops.sumToShape(dy, [2, 1]).toArray()], [6, 15]);
 * ```
 */
export function sumToShape(x: Tensor, shape: Shape): Tensor {
  const op = "sumToShape";
  const be = checkTensors(op, { x });
  const s = checkShapeArg(op, "shape", shape);
  const r = broadcastShapes([s, x.shape]);
  if (s.length > x.shape.length || !("shape" in r) || !sameShape(r.shape, x.shape)) {
    throw new RangeError(
      `${op}: shape ${fmtShape(s)} does not broadcast to x ${
        fmtShape(x.shape)
      } (aligned on the right, each dimension must equal x's or be 1)`,
    );
  }
  return be.sumToShape(x, s);
}
