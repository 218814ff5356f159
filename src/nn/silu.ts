/**
 * SiLU (swish) activation: `x · sigmoid(x)`, elementwise.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { Activation } from "./_activation.ts";

/**
 * SiLU activation `x · sigmoid(x)`, elementwise over any shape. No parameters; the forward
 * keeps its input for I, and W does nothing.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, SiLU } from "@conveyor/core";
 * const be = new CpuBackend();
 * const act = new SiLU(be);
 * const x = be.fromData(new Float32Array([0, 2]), [1, 2]);
 * const y = await act.forward(x, { save: false }).toArray();
 * assert.equal(y[0], 0);
 * assert.ok(Math.abs(y[1] - 2 / (1 + Math.exp(-2))) < 1e-6);
 * ```
 */
export class SiLU extends Activation {
  /** Always `"SiLU"`. */
  readonly kind: string = "SiLU";

  /** Creates the activation on `backend`. */
  constructor(backend: Backend) {
    super(
      backend,
      { kind: "SiLU", flopsPerElement: 8, keeps: "input" },
      ops.silu,
      ops.siluBackward,
    );
  }
}
