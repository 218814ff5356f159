// A layer that is the identity forward, but whose input gradient has one
// column too many: a wrong-shaped dx, made by the layer itself. Registered
// as "TestWrongDx"; pipeline workers import this module through `modules`.

import type { Backend, Shape, Tensor } from "../../../src/tensor/mod.ts";
import * as ops from "../../../src/tensor/ops.ts";
import type { LayerCost, LayerSpec } from "../../../src/nn/layer.ts";
import { LayerBase } from "../../../src/nn/layer_base.ts";
import { registerLayer } from "../../../src/nn/layer_registry.ts";

export class WrongDx extends LayerBase<Record<never, never>> {
  readonly kind = "TestWrongDx";

  constructor(backend: Backend) {
    super(backend);
  }

  override spec(): LayerSpec {
    return { kind: "TestWrongDx", args: {} };
  }

  protected outputShapeOf(s: Shape): Shape {
    return s;
  }

  protected costOf(s: Shape): LayerCost {
    return { params: 0, flops: s.reduce((a, b) => a * b, 1) };
  }

  protected forwardImpl(x: Tensor): { y: Tensor; state: Record<never, never> } {
    return { y: ops.copy(x), state: {} };
  }

  protected backwardInputImpl(dy: Tensor): Tensor {
    const [rows, cols] = dy.shape;
    return dy.backend.fromData(new Float32Array(rows * (cols + 1)), [rows, cols + 1]);
  }

  protected backwardWeightImpl(): void {}
}

registerLayer("TestWrongDx", (_args, backend) => new WrongDx(backend));
