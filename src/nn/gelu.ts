/**
 * GELU activation: the tanh approximation of GELU, `0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))`, elementwise.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { Activation } from "./_activation.ts";

/**
 * GELU activation, elementwise over any shape. No parameters; the forward
 * keeps its input for I, and W does nothing.
 *
 * @example
 * ```ts
 * import { CpuBackend, GELU } from "@conveyor/core";
 * const be = new CpuBackend();
 * const act = new GELU(be);
 * const x = be.fromData(new Float32Array([-1, 0.5]), [1, 2]);
 * const y = act.forward(x, { save: false });
 * console.log(await y.toArray());
 * x.dispose();
 * y.dispose();
 * ```
 */
export class GELU extends Activation {
  /** Always `"GELU"`. */
  readonly kind: string = "GELU";

  /** Creates the activation on `backend`. */
  constructor(backend: Backend) {
    super(
      backend,
      { kind: "GELU", flopsPerElement: 8, keeps: "input" },
      ops.gelu,
      ops.geluBackward,
    );
  }
}
