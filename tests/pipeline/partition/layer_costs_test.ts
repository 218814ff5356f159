import assert from "node:assert/strict";
import { GELU } from "../../../src/nn/gelu.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { TokenPositionEmbedding } from "../../../src/nn/token_position_embedding.ts";
import { TransformerBlock } from "../../../src/nn/transformer_block.ts";
import { layerCosts, profileLayerCosts } from "../../../src/pipeline/partition/layer_costs.ts";
import { LoadBalancedPartition } from "../../../src/pipeline/partition/partition.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import * as ops from "../../../src/tensor/ops.ts";
import { randomTensor, Rng } from "../../../src/tensor/random.ts";

function model(be: CpuBackend): Sequential {
  const rng = new Rng(3);
  return new Sequential([
    new TokenPositionEmbedding(be, 50, 8, 16, { rng }),
    new TransformerBlock(be, 16, 2, { rng }),
    new TransformerBlock(be, 16, 2, { rng }),
    new Linear(be, 16, 50, { rng }),
  ]);
}

Deno.test("layerCosts: params, flops and count follow the layers' own estimates", () => {
  const be = new CpuBackend();
  const m = model(be);
  try {
    const shape = [2, 8];
    const params = layerCosts(m, shape, "params");
    const flops = layerCosts(m.layers, shape, "flops");
    assert.deepEqual(params.map((c) => c.kind), [
      "TokenPositionEmbedding",
      "TransformerBlock",
      "TransformerBlock",
      "Linear",
    ]);
    // Parameter counts are the sizes of the layers' parameter tensors.
    m.layers.forEach((l, i) => {
      assert.equal(params[i].cost, l.parameters().reduce((s, p) => s + p.value.size, 0));
    });
    // The head sees [2, 8, 16]: 2·rows·in·out FLOPs.
    assert.equal(flops[3].cost, 2 * 16 * 16 * 50);
    assert.deepEqual(m.costs(shape).map((c) => c.flops), flops.map((c) => c.cost));
    assert.deepEqual(layerCosts(m, shape, "count").map((c) => c.cost), [1, 1, 1, 1]);
    // Straight into the partitioner, with a type selection.
    const r = new LoadBalancedPartition({ typeRegex: "Block" }).partition(params, 2);
    assert.equal(r.stageCosts[0], r.stageCosts[1]);
  } finally {
    m.dispose();
  }
});

Deno.test("layerCosts: unknown source and bad shapes are refused", () => {
  const be = new CpuBackend();
  const m = model(be);
  try {
    assert.throws(
      () => layerCosts(m, [2, 8], "time" as never),
      (e: Error) => e instanceof RangeError && /cost source must be .* got "time"/.test(e.message),
    );
    assert.throws(() => layerCosts(m, [2, 9], "params"), RangeError); // T > maxLen
    assert.throws(() => layerCosts(42 as never, [2], "params"), TypeError);
  } finally {
    m.dispose();
  }
});

Deno.test("profileLayerCosts measures every layer and leaves gradients and state unchanged", async () => {
  const be = new CpuBackend();
  const layers = [new Linear(be, 8, 64, { seed: 1 }), new GELU(be), new Linear(be, 64, 8)];
  const x = randomTensor(be, [32, 8], new Rng(5));
  try {
    // Non-zero gradients to start from.
    for (const p of layers.flatMap((l) => l.parameters())) {
      const g = randomTensor(be, p.grad.shape, new Rng(p.grad.size));
      ops.axpyInPlace(p.grad, 1, g);
      g.dispose();
    }
    const before = await Promise.all(
      layers.flatMap((l) => l.parameters()).map((p) => p.grad.toArray()),
    );
    const live = be.memory.liveBytes;
    const costs = await profileLayerCosts(layers, x, { repeats: 2, warmup: 0 });
    assert.deepEqual(costs.map((c) => c.kind), ["Linear", "GELU", "Linear"]);
    assert.ok(costs.every((c) => Number.isFinite(c.cost) && c.cost >= 0));
    const after = await Promise.all(
      layers.flatMap((l) => l.parameters()).map((p) => p.grad.toArray()),
    );
    assert.deepEqual(after, before);
    assert.equal(be.memory.liveBytes, live);
    for (const l of layers) assert.deepEqual(l.heldKeys(), []);
    await assert.rejects(
      () => profileLayerCosts(layers, x, { repeats: 0 }),
      /repeats must be an integer >= 1, got 0/,
    );
    const bad = be.zeros([4, 7]);
    await assert.rejects(() => profileLayerCosts(layers, bad), RangeError);
    bad.dispose();
  } finally {
    x.dispose();
    for (const l of layers) l.dispose();
  }
});
