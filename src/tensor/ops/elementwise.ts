/**
 * Elementwise arithmetic: broadcasting binary ops, `where`, `exp` and `log`,
 * bias, scale, axpy, fills and copies.
 *
 * @module
 */

import type { Backend, BinaryOp, Shape } from "../backend.ts";
import {
  aliases,
  checkBackend,
  checkBroadcast,
  checkColVector,
  checkFinite,
  checkRank,
  checkSameShape,
  checkShapeArg,
  checkTensors,
  describe,
} from "./_check.ts";
import type { Tensor } from "../tensor.ts";

function binaryOp(op: BinaryOp, a: Tensor, b: Tensor): Tensor {
  const be = checkTensors(op, { a, b });
  return be.binary(op, a, b, checkBroadcast(op, { a, b }));
}

/**
 * Elementwise `a + b` with NumPy broadcasting: shapes are aligned on the
 * right and each dimension must be equal or 1 in one of them (e.g. `[C]`
 * or `[1, C]` against `[B, T, C]`); the result has the broadcast shape.
 * Incompatible shapes are a RangeError naming both. The gradient of a
 * broadcast operand is {@linkcode sumToShape} of the output gradient.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const row = be.fromData(new Float32Array([10, 20]), [2]);
 * assert.deepEqual([...await ops.add(x, row).toArray()], [11, 22, 13, 24]);
 * ```
 */
export function add(a: Tensor, b: Tensor): Tensor {
  return binaryOp("add", a, b);
}

/**
 * Elementwise `a - b` with broadcasting (see {@linkcode add}).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const col = be.fromData(new Float32Array([1, 3]), [2, 1]);
 * assert.deepEqual([...await ops.sub(x, col).toArray()], [0, 1, 0, 1]);
 * ```
 */
export function sub(a: Tensor, b: Tensor): Tensor {
  return binaryOp("sub", a, b);
}

/**
 * Elementwise `a * b` with broadcasting (see {@linkcode add}).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const s = be.fromData(new Float32Array([2]), [1]);
 * assert.deepEqual([...await ops.mul(x, s).toArray()], [2, 4, 6, 8]);
 * ```
 */
export function mul(a: Tensor, b: Tensor): Tensor {
  return binaryOp("mul", a, b);
}

/**
 * Elementwise `a / b` with broadcasting (see {@linkcode add}), IEEE
 * semantics on every backend: `x / ±0` is ±∞ and `0 / 0` is NaN.
 * Gradients: `da = dy / b`, `db = −dy · (a / b) / b`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, -2, 0]), [3]);
 * const z = be.fromData(new Float32Array([0]), [1]);
 * assert.deepEqual([...await ops.div(x, z).toArray()], [Infinity, -Infinity, NaN]);
 * ```
 */
export function div(a: Tensor, b: Tensor): Tensor {
  return binaryOp("div", a, b);
}

/**
 * Elementwise maximum with broadcasting (see {@linkcode add}); NaN when
 * either operand is NaN (as PyTorch's `maximum`, unlike WGSL's `max`), +0
 * for (0, −0). Gradient: `dy` flows to `a` where `a > b`, else to `b`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([-1, 2, NaN]), [3]);
 * const zero = be.zeros([1]);
 * assert.deepEqual([...await ops.maximum(x, zero).toArray()], [0, 2, NaN]);
 * ```
 */
export function maximum(a: Tensor, b: Tensor): Tensor {
  return binaryOp("maximum", a, b);
}

/**
 * `cond ≠ 0 ? a : b`, elementwise, all three broadcast together (see
 * {@linkcode add}). Any non-zero `cond` counts as true, NaN included. The
 * output is exactly the selected element, so `where` can replace NaNs (the
 * one elementwise op for which a NaN operand need not give NaN).
 * Gradients: `da = where(cond, dy, 0)`, `db = where(cond, 0, dy)`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const cond = be.fromData(new Float32Array([1, 0, 1]), [3]);
 * const a = be.fromData(new Float32Array([1, 2, 3]), [3]);
 * const b = be.fromData(new Float32Array([-1]), [1]);
 * assert.deepEqual([...await ops.where(cond, a, b).toArray()], [1, -1, 3]);
 * ```
 */
export function where(cond: Tensor, a: Tensor, b: Tensor): Tensor {
  const be = checkTensors("where", { cond, a, b });
  return be.where(cond, a, b, checkBroadcast("where", { cond, a, b }));
}

/**
 * `exp(x)`, elementwise (overflow gives +∞ on every backend; NaN stays
 * NaN). Gradient: `dy · exp(x)`, i.e. `mul(dy, y)`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0, 100, -Infinity]), [3]);
 * assert.deepEqual([...await ops.exp(x).toArray()], [1, Infinity, 0]);
 * ```
 */
export function exp(x: Tensor): Tensor {
  return checkTensors("exp", { x }).unary("exp", x);
}

/**
 * Natural `log(x)`, elementwise, IEEE semantics on every backend: −∞ at
 * ±0, NaN below 0 (and for NaN). Gradient: `dy / x`, i.e. `div(dy, x)`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 0, -1]), [3]);
 * assert.deepEqual([...await ops.log(x).toArray()], [0, -Infinity, NaN]);
 * ```
 */
export function log(x: Tensor): Tensor {
  return checkTensors("log", { x }).unary("log", x);
}

/**
 * A new tensor of `shape` on `backend` with every element `value` (any
 * number: NaN and ±∞ too, e.g. a −∞ mask).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const t = ops.full(be, [2, 2], -Infinity);
 * assert.deepEqual(t.shape, [2, 2]);
 * assert.deepEqual([...await t.toArray()], [-Infinity, -Infinity, -Infinity, -Infinity]);
 * ```
 */
export function full(backend: Backend, shape: Shape, value: number): Tensor {
  const be = checkBackend("full", backend);
  const s = checkShapeArg("full", "shape", shape);
  if (typeof value !== "number") {
    throw new TypeError(`full: value must be a number, got ${describe(value)}`);
  }
  return be.full(s, value);
}

/**
 * A new tensor of `shape` on `backend` filled with ones.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * assert.deepEqual([...await ops.ones(be, [3]).toArray()], [1, 1, 1]);
 * ```
 */
export function ones(backend: Backend, shape: Shape): Tensor {
  const be = checkBackend("ones", backend);
  return be.full(checkShapeArg("ones", "shape", shape), 1);
}

/**
 * `x + bias`, with `bias` of shape `[cols]` added to every row.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.zeros([2, 2]);
 * const b = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.addBias(x, b).toArray()); // Float32Array [1, 2, 1, 2]
 * ```
 */
export function addBias(x: Tensor, bias: Tensor): Tensor {
  const be = checkTensors("addBias", { x, bias });
  checkRank("addBias", "x", x, 1);
  checkColVector("addBias", "bias", bias, "x", x);
  return be.addBias(x, bias);
}

/**
 * `s * x`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.scale(x, 3).toArray()); // Float32Array [3, 6]
 * ```
 */
export function scale(x: Tensor, s: number): Tensor {
  const be = checkTensors("scale", { x });
  checkFinite("scale", "s", s);
  return be.scale(x, s);
}

/**
 * In place: `y += alpha * x` (same shapes; `x` may be `y` itself).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([1, 1]), [2]);
 * ops.axpyInPlace(y, 2, be.fromData(new Float32Array([1, 2]), [2]));
 * console.log(await y.toArray()); // Float32Array [3, 5]
 * ```
 */
export function axpyInPlace(y: Tensor, alpha: number, x: Tensor): void {
  const be = checkTensors("axpyInPlace", { y, x });
  checkFinite("axpyInPlace", "alpha", alpha);
  checkSameShape("axpyInPlace", "y", y, "x", x);
  // A GPU kernel cannot bind one buffer as both input and output, so an
  // aliased source is copied first; every backend then sees distinct storage.
  if (aliases(y, x)) {
    const tmp = be.copy(x);
    try {
      be.axpyInPlace(y, alpha, tmp);
    } finally {
      tmp.dispose();
    }
    return;
  }
  be.axpyInPlace(y, alpha, x);
}

/**
 * In place: `x ← s * x` (no temporary, unlike `scale`).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * ops.scaleInPlace(x, 3);
 * console.log(await x.toArray()); // Float32Array [3, 6]
 * ```
 */
export function scaleInPlace(x: Tensor, s: number): void {
  const be = checkTensors("scaleInPlace", { x });
  checkFinite("scaleInPlace", "s", s);
  be.scaleInPlace(x, s);
}

/**
 * In place: every element of `x` becomes `value`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.zeros([3]);
 * ops.fillInPlace(x, 7);
 * console.log(await x.toArray()); // Float32Array [7, 7, 7]
 * ```
 */
export function fillInPlace(x: Tensor, value: number): void {
  const be = checkTensors("fillInPlace", { x });
  checkFinite("fillInPlace", "value", value);
  be.fillInPlace(x, value);
}

/**
 * A fresh copy of `x` (its own storage).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.copy(x).toArray()); // Float32Array [1, 2]
 * ```
 */
export function copy(x: Tensor): Tensor {
  const be = checkTensors("copy", { x });
  return be.copy(x);
}
