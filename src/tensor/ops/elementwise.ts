/**
 * Elementwise arithmetic: binary ops, bias, scale, axpy, fill and copies.
 *
 * @module
 */

import {
  aliases,
  checkColVector,
  checkFinite,
  checkRank,
  checkSameShape,
  checkTensors,
} from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * Elementwise `a + b` (same shapes).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.add(a, a).toArray()); // Float32Array [2, 4]
 * ```
 */
export function add(a: Tensor, b: Tensor): Tensor {
  const be = checkTensors("add", { a, b });
  checkSameShape("add", "a", a, "b", b);
  return be.add(a, b);
}

/**
 * Elementwise `a - b` (same shapes).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.sub(a, a).toArray()); // Float32Array [0, 0]
 * ```
 */
export function sub(a: Tensor, b: Tensor): Tensor {
  const be = checkTensors("sub", { a, b });
  checkSameShape("sub", "a", a, "b", b);
  return be.sub(a, b);
}

/**
 * Elementwise `a * b` (same shapes).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.mul(a, a).toArray()); // Float32Array [1, 4]
 * ```
 */
export function mul(a: Tensor, b: Tensor): Tensor {
  const be = checkTensors("mul", { a, b });
  checkSameShape("mul", "a", a, "b", b);
  return be.mul(a, b);
}

/**
 * `x + bias`, with `bias` of shape `[cols]` added to every row.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
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
 * import { CpuBackend, ops } from "@conveyor/core";
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
 * import { CpuBackend, ops } from "@conveyor/core";
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
 * import { CpuBackend, ops } from "@conveyor/core";
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
 * import { CpuBackend, ops } from "@conveyor/core";
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
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.copy(x).toArray()); // Float32Array [1, 2]
 * ```
 */
export function copy(x: Tensor): Tensor {
  const be = checkTensors("copy", { x });
  return be.copy(x);
}
