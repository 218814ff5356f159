// A layer the library does not know: y = x + MLP(x), registered under
// "TestResidualMLP". The pipeline workers import this module (the model's
// `modules` option), which registers it there too.

import type { Backend, Shape, Tensor } from "../../../src/tensor/mod.ts";
import * as ops from "../../../src/tensor/ops.ts";
import type { LayerCost, LayerSpec, StateKey } from "../../../src/nn/layer.ts";
import { LayerBase } from "../../../src/nn/layer_base.ts";
import { MLP } from "../../../src/nn/mlp.ts";
import { registerLayer } from "../../../src/nn/layer_registry.ts";

export class ResidualMLP extends LayerBase<Record<string, never>> {
  readonly kind = "TestResidualMLP";
  readonly dim: number;
  readonly hidden: number;
  readonly mlp: MLP;

  constructor(backend: Backend, dim: number, hidden: number, seed = 0) {
    super(backend);
    this.dim = dim;
    this.hidden = hidden;
    this.mlp = this.addChild("mlp", new MLP(backend, dim, { hidden, seed }));
  }

  override spec(): LayerSpec {
    return { kind: "TestResidualMLP", args: { dim: this.dim, hidden: this.hidden } };
  }

  protected outputShapeOf(s: Shape): Shape {
    return this.mlp.outputShape(s);
  }

  protected costOf(s: Shape): LayerCost {
    return this.mlp.cost(s);
  }

  protected forwardImpl(x: Tensor, key: StateKey, save: boolean): { y: Tensor } {
    const h = this.mlp.forward(x, { key, save });
    const y = ops.add(x, h);
    h.dispose();
    return { y };
  }

  protected backwardInputImpl(dy: Tensor, _state: Record<string, never>, key: StateKey): Tensor {
    const g = this.mlp.backwardInput(dy, key);
    const dx = ops.add(dy, g);
    g.dispose();
    return dx;
  }

  protected backwardWeightImpl(_state: Record<string, never>, key: StateKey): void {
    this.mlp.backwardWeight(key);
  }
}

registerLayer(
  "TestResidualMLP",
  (args, backend) => new ResidualMLP(backend, args.dim as number, args.hidden as number),
);
