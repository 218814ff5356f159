import assert from "node:assert/strict";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import { loadGPT2 } from "../../../src/nn/gpt2.ts";
import { createTinyGPT } from "../../../src/nn/gpt.ts";
import { generate, streamTokens } from "../../../src/nn/generate.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { referenceGreedy, TINY, writeTinyGPT2 } from "../../nn/_gpt2_reference.ts";

const be = new CpuBackend();
const base = {
  ranks: 2,
  microBatches: 2,
  loss: "cross-entropy",
  backend: "cpu",
  optimizer: { kind: "sgd", lr: 0.1 },
} as const;

Deno.test("PipelineParallelModel.generate: greedy from a GPT-2 folder on 2 ranks in workers equals an independent float64 GPT-2 token for token, with and without the cache, prompts batched; the caches are freed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "conveyor_pgen_" });
  try {
    const t = await writeTinyGPT2(dir);
    const { model: net } = await loadGPT2(dir, be);
    const prompts = [[11, 200, 3, 45, 45, 7], [1, 2], [299, 0, 150]];
    const want = prompts.map((p) => referenceGreedy(t, TINY, p, 10));
    for (const schedule of ["1f1b", "zb-v"] as const) {
      await using model = await PipelineParallelModel.create({ ...base, model: net, schedule });
      // Without the cache first: the embedding keeps its position ids per length (a cache of its own).
      for (const cache of [false, true]) {
        const before = (await model.rankInfo()).map((r) => r.liveBytes);
        const r = await model.generate(prompts, { maxTokens: 10, temperature: 0, cache });
        assert.deepEqual(r.ids, want, `${schedule}, cache ${cache}`);
        const after = (await model.rankInfo()).map((r) => r.liveBytes);
        if (cache) assert.deepEqual(after, before, `${schedule}: every key/value cache freed`);
      }
      assert.equal(model.rankGroup, "workers");
    }
    net.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("PipelineParallelModel.generate: seeded sampling equals the plain model's (tied GPT on zb-v, one copy of the table); bad options refused without closing the model", async () => {
  const cfg = {
    vocabSize: 17,
    seqLen: 32,
    dim: 16,
    heads: 2,
    layers: 4,
    seed: 2,
    tieEmbeddings: true,
  };
  const net = createTinyGPT(cfg, be);
  const opts = { maxTokens: 8, temperature: 0.9, topK: 8, topP: 0.9, seed: 11 };
  const want = await generate(net, [[1, 2, 3], [4]], opts);
  await using model = await PipelineParallelModel.create({
    ...base,
    model: net,
    schedule: "zb-v",
    rankGroup: "in-process",
  } as PipelineParallelModelOptions);
  net.dispose();
  assert.deepEqual((await model.generate([[1, 2, 3], [4]], opts)).ids, want.ids);
  await assert.rejects(
    () => model.generate([1], { maxTokens: 40 }),
    /past the model's context of 32/,
  );
  await assert.rejects(
    () => model.generate([1], { maxTokens: 2, topk: 3 } as never),
    /did you mean topK/,
  );
  assert.equal(model.closed, false);
  assert.deepEqual((await model.generate([[1, 2, 3], [4]], opts)).ids, want.ids);
  // The same tokens as an async iterator, each as it is chosen; an error comes through it.
  const streamed: number[][] = [[], []];
  const it = streamTokens((onToken) => model.generate([[1, 2, 3], [4]], { ...opts, onToken }));
  for await (const t of it) streamed[t.prompt].push(t.id);
  assert.deepEqual(streamed, want.ids);
  await assert.rejects(async () => {
    for await (
      const _ of streamTokens((onToken) => model.generate([1], { maxTokens: 0, onToken }))
    ) {
      // nothing comes
    }
  }, /maxTokens must be an integer ≥ 1, got 0/);
});
