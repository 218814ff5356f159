/**
 * ReLU activation: max(x, 0), elementwise.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { retain } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { LayerCost, LayerSpec } from "./layer.ts";

/** @internal What the layer keeps between its passes. */
interface ReLUState {
  x?: Tensor; // the input, [...] (view)
}

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
export class ReLU extends LayerBase<ReLUState> {
  /** Always `"ReLU"`. */
  readonly kind: string = "ReLU";

  /** Creates the activation on `backend`. */
  constructor(backend: Backend) {
    super(backend);
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "ReLU", args: {} };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: 0, flops: 1 * n };
  }

  /** @ignore */
  protected forwardImpl(x: Tensor, _key: unknown, save: boolean): { y: Tensor; state?: ReLUState } {
    const y = ops.relu(x); // [...]
    return save ? { y, state: { x: retain(x) } } : { y };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, state: ReLUState): Tensor {
    const dx = ops.reluBackward(state.x!, dy); // [...]
    state.x!.dispose();
    delete state.x; // W needs nothing
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(): void {}
}
