/**
 * Activations and their input gradients. NaN in gives NaN out on every
 * backend, for the activations and for their gradients.
 *
 * @module
 */

import { checkSameShape, checkTensors } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * `max(x, 0)`; NaN stays NaN (every activation keeps NaN on every backend).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([-1, 2]), [2]);
 * console.log(await ops.relu(x).toArray()); // Float32Array [0, 2]
 * ```
 */
export function relu(x: Tensor): Tensor {
  return checkTensors("relu", { x }).unary("relu", x);
}

/**
 * ReLU input gradient: `dy * (x > 0)`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([-1, 2]), [2]);
 * const dy = be.fromData(new Float32Array([5, 5]), [2]);
 * console.log(await ops.reluBackward(x, dy).toArray()); // Float32Array [0, 5]
 * ```
 */
export function reluBackward(x: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("reluBackward", { x, dy });
  checkSameShape("reluBackward", "x", x, "dy", dy);
  return be.unaryBackward("relu", x, dy);
}

/**
 * GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0, 1]), [2]);
 * console.log(await ops.gelu(x).toArray()); // ≈ [0, 0.8412]
 * ```
 */
export function gelu(x: Tensor): Tensor {
  return checkTensors("gelu", { x }).unary("gelu", x);
}

/**
 * GELU input gradient: `dy * gelu'(x)` (tanh approximation).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0]), [1]);
 * const dy = be.fromData(new Float32Array([1]), [1]);
 * console.log(await ops.geluBackward(x, dy).toArray()); // Float32Array [0.5]
 * ```
 */
export function geluBackward(x: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("geluBackward", { x, dy });
  checkSameShape("geluBackward", "x", x, "dy", dy);
  return be.unaryBackward("gelu", x, dy);
}

/**
 * `tanh(x)`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0]), [1]);
 * console.log(await ops.tanh(x).toArray()); // Float32Array [0]
 * ```
 */
export function tanh(x: Tensor): Tensor {
  return checkTensors("tanh", { x }).unary("tanh", x);
}

/**
 * Tanh input gradient from its output: `dy * (1 - y²)`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([0.5]), [1]);
 * const dy = be.fromData(new Float32Array([1]), [1]);
 * console.log(await ops.tanhBackward(y, dy).toArray()); // Float32Array [0.75]
 * ```
 */
export function tanhBackward(y: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("tanhBackward", { y, dy });
  checkSameShape("tanhBackward", "y", y, "dy", dy);
  return be.unaryBackward("tanh", y, dy);
}

/**
 * Logistic sigmoid `1 / (1 + exp(−x))`, computed without overflow for
 * large |x|.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0, -200, 200]), [3]);
 * assert.deepEqual([...await ops.sigmoid(x).toArray()], [0.5, 0, 1]);
 * ```
 */
export function sigmoid(x: Tensor): Tensor {
  return checkTensors("sigmoid", { x }).unary("sigmoid", x);
}

/**
 * Sigmoid input gradient from its output: `dy · y · (1 − y)`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([0.5]), [1]);
 * const dy = be.fromData(new Float32Array([2]), [1]);
 * assert.deepEqual([...await ops.sigmoidBackward(y, dy).toArray()], [0.5]);
 * ```
 */
export function sigmoidBackward(y: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("sigmoidBackward", { y, dy });
  checkSameShape("sigmoidBackward", "y", y, "dy", dy);
  return be.unaryBackward("sigmoid", y, dy);
}

/**
 * SiLU (swish) `x · sigmoid(x)`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0, 1]), [2]);
 * const y = await ops.silu(x).toArray();
 * assert.equal(y[0], 0);
 * assert.ok(Math.abs(y[1] - 0.7310586) < 1e-6);
 * ```
 */
export function silu(x: Tensor): Tensor {
  return checkTensors("silu", { x }).unary("silu", x);
}

/**
 * SiLU input gradient from its input: `dy · s · (1 + x · (1 − s))`,
 * `s = sigmoid(x)`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0]), [1]);
 * const dy = be.fromData(new Float32Array([3]), [1]);
 * assert.deepEqual([...await ops.siluBackward(x, dy).toArray()], [1.5]);
 * ```
 */
export function siluBackward(x: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("siluBackward", { x, dy });
  checkSameShape("siluBackward", "x", x, "dy", dy);
  return be.unaryBackward("silu", x, dy);
}
