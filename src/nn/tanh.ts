/**
 * Tanh activation: `tanh(x)`, elementwise.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { retain } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { LayerCost, LayerSpec } from "./layer.ts";

/** @internal What the layer keeps between its passes. */
interface TanhState {
  y?: Tensor; // the output, [...] (view)
}

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
export class Tanh extends LayerBase<TanhState> {
  /** Always `"Tanh"`. */
  readonly kind: string = "Tanh";

  /** Creates the activation on `backend`. */
  constructor(backend: Backend) {
    super(backend);
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "Tanh", args: {} };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: 0, flops: 4 * n };
  }

  /** @ignore */
  protected forwardImpl(x: Tensor, _key: unknown, save: boolean): { y: Tensor; state?: TanhState } {
    const y = ops.tanh(x); // [...]
    // The backward formula uses the output, so the output is what is kept.
    return save ? { y, state: { y: retain(y) } } : { y };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, state: TanhState): Tensor {
    const dx = ops.tanhBackward(state.y!, dy); // [...]
    state.y!.dispose();
    delete state.y; // W needs nothing
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(): void {}
}
