/**
 * ReLU activation: max(x, 0), elementwise.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { Activation } from "./_activation.ts";

/**
 * ReLU activation, elementwise over any shape. No parameters; the forward
 * keeps its input for I, and W does nothing.
 *
 * @example
 * ```ts
 * import { CpuBackend, ReLU } from "@conveyor/core";
 * const be = new CpuBackend();
 * const act = new ReLU(be);
 * const x = be.fromData(new Float32Array([-1, 0.5]), [1, 2]);
 * const y = act.forward(x, { save: false });
 * console.log(await y.toArray());
 * x.dispose();
 * y.dispose();
 * ```
 */
export class ReLU extends Activation {
  /** Always `"ReLU"`. */
  readonly kind: string = "ReLU";

  /** Creates the activation on `backend`. */
  constructor(backend: Backend) {
    super(
      backend,
      { kind: "ReLU", flopsPerElement: 1, keeps: "input" },
      ops.relu,
      ops.reluBackward,
    );
  }
}
