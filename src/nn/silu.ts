/**
 * SiLU (swish) activation: `x · sigmoid(x)`, elementwise.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { retain } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { LayerCost, LayerSpec } from "./layer.ts";

/** @internal What the layer keeps between its passes. */
interface SiLUState {
  x?: Tensor; // the input, [...] (view)
}

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
export class SiLU extends LayerBase<SiLUState> {
  /** Always `"SiLU"`. */
  readonly kind: string = "SiLU";

  /** Creates the activation on `backend`. */
  constructor(backend: Backend) {
    super(backend);
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "SiLU", args: {} };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: 0, flops: 8 * n };
  }

  /** @ignore */
  protected forwardImpl(x: Tensor, _key: unknown, save: boolean): { y: Tensor; state?: SiLUState } {
    const y = ops.silu(x); // [...]
    return save ? { y, state: { x: retain(x) } } : { y };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, state: SiLUState): Tensor {
    const dx = ops.siluBackward(state.x!, dy); // [...]
    state.x!.dispose();
    delete state.x; // W needs nothing
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(): void {}
}
