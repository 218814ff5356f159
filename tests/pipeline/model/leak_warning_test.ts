import assert from "node:assert/strict";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import type { Backend, Shape, Tensor } from "../../../src/tensor/mod.ts";
import * as ops from "../../../src/tensor/ops.ts";
import type { LayerCost, LayerSpec } from "../../../src/nn/layer.ts";
import { LayerBase } from "../../../src/nn/layer_base.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { ReLU } from "../../../src/nn/relu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { registerLayer } from "../../../src/nn/layer_registry.ts";
import { UniformPartition } from "../../../src/pipeline/partition/partition.ts";
import { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";

// The identity, forgetting a copy of its input at every forward: a user's
// leak, which only the rank that holds it can see.
class LeakyIdentity extends LayerBase<Record<string, never>> {
  readonly kind = "TestLeakyIdentity";
  readonly forgotten: Tensor[] = [];
  constructor(backend: Backend, readonly leak: boolean) {
    super(backend);
  }
  override spec(): LayerSpec {
    return { kind: this.kind, args: { leak: this.leak } };
  }
  protected outputShapeOf(s: Shape): Shape {
    return s;
  }
  protected costOf(s: Shape): LayerCost {
    return { params: 0, flops: s.reduce((a, b) => a * b, 1) };
  }
  protected forwardImpl(x: Tensor): { y: Tensor; state: Record<string, never> } {
    if (this.leak) this.forgotten.push(ops.copy(x));
    return { y: ops.copy(x), state: {} };
  }
  protected backwardInputImpl(dy: Tensor): Tensor {
    return ops.copy(dy);
  }
  protected backwardWeightImpl(): void {}
}
registerLayer("TestLeakyIdentity", (a, be) => new LeakyIdentity(be, a.leak as boolean));

async function warningsOf(leak: boolean, steps: number): Promise<string[]> {
  const be = new CpuBackend();
  const net = new Sequential([
    new Linear(be, 4, 8, { seed: 1 }),
    new ReLU(be),
    new LeakyIdentity(be, leak),
    new Linear(be, 8, 1, { seed: 2 }),
  ]);
  const warnings: string[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void warnings.push(args.map(String).join(" "));
  try {
    await using model = await PipelineParallelModel.create({
      model: net,
      schedule: "zb-h1",
      ranks: 2,
      microBatches: 2,
      optimizer: { kind: "adamw", lr: 1e-3 },
      loss: "mse",
      backend: "cpu",
      rankGroup: "in-process",
      partition: new UniformPartition(), // layers [0, 2) on rank 0, [2, 4) on rank 1
    });
    const batch = {
      inputs: new Float32Array(16).map((_, i) => Math.sin(i)),
      shape: [4, 4],
      targets: new Float32Array(4).fill(0.5),
    };
    await model.train(Array.from({ length: steps }, () => batch));
    await model.train(Array.from({ length: steps }, () => batch), { window: 1 });
  } finally {
    console.warn = warn;
    net.dispose();
  }
  return warnings;
}

Deno.test("a layer that leaks a tensor every step is reported once, naming its rank", async () => {
  const warnings = await warningsOf(true, 8);
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.match(warnings[0], /^conveyor: rank 1: LeakWatch: live tensor memory grew 5 steps/);
  assert.match(warnings[0], /never disposed/);
});

Deno.test("training without a leak warns of nothing", async () => {
  assert.deepEqual(await warningsOf(false, 8), []);
});
