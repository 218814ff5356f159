// A custom layer that does not override spec(): an identity (a copy) for
// the tests of what happens to layers that cannot describe themselves.

import { LayerBase } from "../../src/nn/layer_base.ts";
import type { LayerCost } from "../../src/nn/layer.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { Shape, Tensor } from "../../src/tensor/mod.ts";

/** `y = x`, kind "NoSpec", without a spec(). */
export class NoSpec extends LayerBase {
  readonly kind = "NoSpec";
  protected outputShapeOf(s: Shape): Shape {
    return s;
  }
  protected costOf(): LayerCost {
    return { params: 0, flops: 1 };
  }
  protected forwardImpl(x: Tensor): { y: Tensor } {
    return { y: ops.copy(x) };
  }
  protected backwardInputImpl(dy: Tensor): Tensor {
    return ops.copy(dy);
  }
  protected backwardWeightImpl(): void {}
}
