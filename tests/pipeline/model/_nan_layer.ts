// A layer that is the identity, except in one training step at one
// micro-batch (named by its first row in the full batch), where it turns its
// output (forward) or its input gradient (backward) into NaN: a non-finite
// value appearing at a chosen stage, micro-batch and pass. Registered as
// "TestNanAt"; pipeline workers import this module through `modules`.

import type { Backend, Shape, Tensor } from "../../../src/tensor/mod.ts";
import * as ops from "../../../src/tensor/ops.ts";
import type { ForwardContext, LayerCost, LayerSpec, StateKey } from "../../../src/nn/layer.ts";
import { LayerBase } from "../../../src/nn/layer_base.ts";
import { registerLayer } from "../../../src/nn/layer_registry.ts";

export interface NanAtOptions {
  /** Training step, or -1 for never. */
  readonly step: number;
  /** First row (in the full batch) of the micro-batch. */
  readonly row: number;
  readonly pass: "forward" | "backward";
}

export class NanAt extends LayerBase<{ hit: boolean }> {
  readonly kind = "TestNanAt";
  readonly o: NanAtOptions;

  constructor(backend: Backend, o: NanAtOptions) {
    super(backend);
    this.o = o;
  }

  override spec(): LayerSpec {
    return { kind: "TestNanAt", args: { ...this.o } };
  }

  protected outputShapeOf(s: Shape): Shape {
    return s;
  }

  protected costOf(s: Shape): LayerCost {
    return { params: 0, flops: s.reduce((a, b) => a * b, 1) };
  }

  protected forwardImpl(
    x: Tensor,
    _key: StateKey,
    _save: boolean,
    ctx: ForwardContext,
  ): { y: Tensor; state: { hit: boolean } } {
    const hit = ctx.training && ctx.step === this.o.step && ctx.rowOffset === this.o.row;
    const y = hit && this.o.pass === "forward" ? this.#nans(x) : ops.copy(x);
    return { y, state: { hit } };
  }

  protected backwardInputImpl(dy: Tensor, state: { hit: boolean }): Tensor {
    return state.hit && this.o.pass === "backward" ? this.#nans(dy) : ops.copy(dy);
  }

  protected backwardWeightImpl(): void {}

  #nans(like: Tensor): Tensor {
    return like.backend.fromData(new Float32Array(like.size).fill(NaN), like.shape);
  }
}

registerLayer(
  "TestNanAt",
  (args, backend) => new NanAt(backend, args as unknown as NanAtOptions),
);
