/**
 * Your own layer, trained across pipeline ranks in workers: `LayerScale`
 * (y = x · γ, one learnable scale per channel) with its backward split into
 * the input gradient (I) and the weight gradient (W). The workers import
 * this module (the `modules` option), which registers the layer there too.
 *
 * ```sh
 * deno run -A examples/own_layer.ts
 * ```
 *
 * @module
 */

import {
  CpuBackend,
  GELU,
  type LayerSpec,
  Linear,
  PipelineParallelModel,
  Rng,
  Sequential,
  type Shape,
} from "../mod.ts";
import { type Backend, ops, type Tensor } from "../tensor.ts";
import { LayerBase, type LayerCost, registerLayer } from "../nn.ts";

/** y = x · γ over the last dimension; γ starts at `init`. */
type State = { x?: Tensor; dy?: Tensor };

export class LayerScale extends LayerBase<State> {
  readonly kind = "LayerScale";
  readonly gamma: Tensor;
  constructor(backend: Backend, readonly dim: number, readonly init = 0.1) {
    super(backend);
    this.gamma = this.addParam("gamma", ops.full(backend, [dim], init));
  }
  override spec(): LayerSpec {
    return { kind: "LayerScale", args: { dim: this.dim, init: this.init } };
  }
  protected outputShapeOf(s: Shape): Shape {
    return s;
  }
  protected costOf(s: Shape): LayerCost {
    return { params: this.dim, flops: s.reduce((a, b) => a * b, 1) };
  }
  // F: keep x for W (a view of the caller's tensor, no copy).
  protected forwardImpl(x: Tensor, _key: unknown, save: boolean): { y: Tensor; state: State } {
    return { y: ops.mul(x, this.gamma), state: save ? { x: x.reshape(x.shape) } : {} };
  }
  // I: dx = dy · γ.
  protected backwardInputImpl(dy: Tensor, state: State): Tensor {
    state.dy = dy.reshape(dy.shape);
    return ops.mul(dy, this.gamma);
  }
  // W: dγ += Σ over rows of dy · x.
  protected backwardWeightImpl(state: State): void {
    const prod = ops.mul(state.dy!, state.x!);
    const g = ops.sumToShape(prod, [this.dim]);
    ops.axpyInPlace(this.gradOf(this.gamma), 1, g);
    for (const t of [prod, g]) t.dispose();
  }
}

registerLayer("LayerScale", (a, be) => new LayerScale(be, a.dim as number, a.init as number));

if (import.meta.main) {
  const cpu = new CpuBackend();
  const net = new Sequential([
    new Linear(cpu, 2, 32, { seed: 1 }),
    new GELU(cpu),
    new LayerScale(cpu, 32),
    new Linear(cpu, 32, 1, { seed: 2 }),
  ]);
  await using model = await PipelineParallelModel.create({
    model: net,
    schedule: "zb-h1",
    ranks: 2,
    microBatches: 4,
    optimizer: { kind: "adamw", lr: 0.02 },
    loss: "mse",
    backend: "cpu",
    modules: [import.meta.url], // each worker registers LayerScale
  });
  net.dispose();
  const rng = new Rng(3);
  for (let step = 1; step <= 60; step++) {
    const inputs = new Float32Array(64 * 2).map(() => 2 * rng.next() - 1);
    const targets = new Float32Array(64).map((_, i) => inputs[2 * i] * inputs[2 * i + 1]);
    const r = await model.step({ inputs, shape: [64, 2], targets });
    if (step % 20 === 0) console.log(`step ${step}: loss ${r.loss.toFixed(4)}`);
  }
}
