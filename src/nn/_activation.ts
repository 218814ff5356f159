// The machinery of the parameter-free elementwise activations (ReLU, GELU,
// Tanh, SiLU): each is a kernel, its input gradient, a FLOP count and the
// tensor that gradient reads. Not exported from the package.

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import { retain } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { LayerCost, LayerSpec } from "./layer.ts";

/** What sets one elementwise activation apart. */
export interface ActivationDef {
  /** The kind in its spec, e.g. `"GELU"`. */
  readonly kind: string;
  /** Forward FLOPs per element (for `cost`). */
  readonly flopsPerElement: number;
  /**
   * What the input gradient reads: the forward's input `x`, or its output
   * `y` (then callers must not modify the output in place while it is kept).
   */
  readonly keeps: "input" | "output";
}

/**
 * @internal What an activation keeps between its passes: the one tensor its
 * input gradient reads (the field names are those subclasses' hooks see).
 */
export interface ActivationState {
  x?: Tensor; // the input, [...] (view), where the gradient reads it
  y?: Tensor; // the output, [...] (view), where the gradient reads it
}

/**
 * @internal Base of the elementwise activations, over any shape. No
 * parameters; the forward keeps `x` or `y` for I, and W does nothing.
 */
export abstract class Activation extends LayerBase<ActivationState> {
  readonly #def: ActivationDef;
  readonly #forward: (x: Tensor) => Tensor;
  readonly #backward: (kept: Tensor, dy: Tensor) => Tensor;

  /** Binds the activation to `backend`; `forward` is `y = f(x)`, `backward` `dx` from the kept tensor and `dy`. */
  constructor(
    backend: Backend,
    def: ActivationDef,
    forward: (x: Tensor) => Tensor,
    backward: (kept: Tensor, dy: Tensor) => Tensor,
  ) {
    super(backend);
    this.#def = def;
    this.#forward = forward;
    this.#backward = backward;
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: this.#def.kind, args: {} };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: 0, flops: this.#def.flopsPerElement * n };
  }

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    _key: unknown,
    save: boolean,
  ): { y: Tensor; state?: ActivationState } {
    const y = this.#forward(x); // [...]
    if (!save) return { y };
    return { y, state: this.#def.keeps === "input" ? { x: retain(x) } : { y: retain(y) } };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, state: ActivationState): Tensor {
    const field = this.#def.keeps === "input" ? "x" : "y";
    const dx = this.#backward(state[field]!, dy); // [...]
    state[field]!.dispose();
    delete state[field]; // W needs nothing
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(): void {}
}
