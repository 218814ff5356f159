/**
 * A residual connection around any layer: `y = x + inner(x)`.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { fmtShape } from "./_util.ts";
import { Block } from "./_block.ts";
import type { ForwardOptions, Layer, LayerCost, LayerSpec, StateKey } from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/**
 * `y = x + inner(x)` on any shape `inner` keeps. Parameters are `inner`'s,
 * prefixed `inner.`. The addition needs no state: I is
 * `dx = dy + innerᴵ(dy)`, W is the inner layer's W. A pre-norm
 * Transformer block is `Residual(Sequential([LayerNorm, CausalSelfAttention]))`
 * then `Residual(Sequential([LayerNorm, MLP]))`: as two layers, a pipeline
 * can cut between its halves (`createTinyGPT`'s `split: "halves"`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, Residual } from "@conveyor/core";
 * const be = new CpuBackend();
 * const res = new Residual(be, new Linear(be, 2, 2, { seed: 1 }));
 * const x = be.fromData(new Float32Array([1, 2]), [1, 2]);
 * const y = res.forward(x, { save: false });
 * const inner = res.inner.forward(x, { save: false });
 * const [a, b] = [await y.toArray(), await inner.toArray()];
 * assert.deepEqual([...a], [1 + b[0], 2 + b[1]]);
 * for (const t of [x, y, inner]) t.dispose();
 * res.dispose();
 * ```
 */
export class Residual extends Block {
  /** Always `"Residual"`. */
  readonly kind: string = "Residual";
  /** The layer the connection goes around. */
  readonly inner: Layer;

  /** Wraps `inner` (which must keep its input's shape); the residual owns it. */
  constructor(backend: Backend, inner: Layer) {
    super(backend);
    if (inner === null || typeof inner !== "object" || typeof inner.forward !== "function") {
      throw new TypeError(`Residual: inner must be a Layer, got ${describeValue(inner)}`);
    }
    this.inner = this.addSublayer("inner", inner);
  }

  /** The architecture for `layerFromSpec`: the inner layer's spec (TypeError if it has none). */
  override spec(): LayerSpec {
    if (typeof this.inner.spec !== "function") {
      throw new TypeError(`Residual: the inner ${this.inner.kind} has no spec()`);
    }
    return { kind: "Residual", args: { inner: this.inner.spec() } };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    const out = this.inner.outputShape(s);
    if (out.length !== s.length || out.some((d, i) => d !== s[i])) {
      throw new RangeError(
        `Residual: the inner ${this.inner.kind} must keep its input's shape, ` +
          `got ${fmtShape(s)} → ${fmtShape(out)}`,
      );
    }
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    const c = this.inner.cost(s);
    return { params: c.params, flops: c.flops + s.reduce((a, b) => a * b, 1) }; // + the add
  }

  /** @ignore */
  protected forwardBlock(x: Tensor, o: ForwardOptions): Tensor {
    const f = this.inner.forward(x, o); // [..., C]
    const y = ops.add(x, f); // [..., C]
    f.dispose();
    return y;
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, _s: unknown, key: StateKey): Tensor {
    const branch = this.inner.backwardInput(dy, key); // [..., C]
    const dx = ops.add(dy, branch); // both paths of y = x + inner(x)
    branch.dispose();
    return dx;
  }
}
