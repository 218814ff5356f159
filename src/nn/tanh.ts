/**
 * Tanh activation: `tanh(x)`, elementwise.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { Activation } from "./_activation.ts";

/**
 * Tanh activation, elementwise over any shape. No parameters; the forward
 * keeps its output (callers must not modify the output in place while it is kept) for I, and W does nothing.
 *
 * @example
 * ```ts
 * import { CpuBackend, Tanh } from "@conveyor/core";
 * const be = new CpuBackend();
 * const act = new Tanh(be);
 * const x = be.fromData(new Float32Array([-1, 0.5]), [1, 2]);
 * const y = act.forward(x, { save: false });
 * console.log(await y.toArray());
 * x.dispose();
 * y.dispose();
 * ```
 */
export class Tanh extends Activation {
  /** Always `"Tanh"`. */
  readonly kind: string = "Tanh";

  /** Creates the activation on `backend`. */
  constructor(backend: Backend) {
    super(
      backend,
      { kind: "Tanh", flopsPerElement: 4, keeps: "output" },
      ops.tanh,
      ops.tanhBackward,
    );
  }
}
