/**
 * Activations and their input gradients.
 *
 * @module
 */

import { checkSameShape, checkTensors } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * `max(x, 0)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([-1, 2]), [2]);
 * console.log(await ops.relu(x).toArray()); // Float32Array [0, 2]
 * ```
 */
export function relu(x: Tensor): Tensor {
  return checkTensors("relu", { x }).relu(x);
}

/**
 * ReLU input gradient: `dy * (x > 0)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([-1, 2]), [2]);
 * const dy = be.fromData(new Float32Array([5, 5]), [2]);
 * console.log(await ops.reluBackward(x, dy).toArray()); // Float32Array [0, 5]
 * ```
 */
export function reluBackward(x: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("reluBackward", { x, dy });
  checkSameShape("reluBackward", "x", x, "dy", dy);
  return be.reluBackward(x, dy);
}

/**
 * GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0, 1]), [2]);
 * console.log(await ops.gelu(x).toArray()); // ≈ [0, 0.8412]
 * ```
 */
export function gelu(x: Tensor): Tensor {
  return checkTensors("gelu", { x }).gelu(x);
}

/**
 * GELU input gradient: `dy * gelu'(x)` (tanh approximation).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0]), [1]);
 * const dy = be.fromData(new Float32Array([1]), [1]);
 * console.log(await ops.geluBackward(x, dy).toArray()); // Float32Array [0.5]
 * ```
 */
export function geluBackward(x: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("geluBackward", { x, dy });
  checkSameShape("geluBackward", "x", x, "dy", dy);
  return be.geluBackward(x, dy);
}

/**
 * `tanh(x)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0]), [1]);
 * console.log(await ops.tanh(x).toArray()); // Float32Array [0]
 * ```
 */
export function tanh(x: Tensor): Tensor {
  return checkTensors("tanh", { x }).tanh(x);
}

/**
 * Tanh input gradient from its output: `dy * (1 - y²)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([0.5]), [1]);
 * const dy = be.fromData(new Float32Array([1]), [1]);
 * console.log(await ops.tanhBackward(y, dy).toArray()); // Float32Array [0.75]
 * ```
 */
export function tanhBackward(y: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("tanhBackward", { y, dy });
  checkSameShape("tanhBackward", "y", y, "dy", dy);
  return be.tanhBackward(y, dy);
}
