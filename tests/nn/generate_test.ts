import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { createTinyGPT } from "../../src/nn/gpt.ts";
import { loadGPT2 } from "../../src/nn/gpt2.ts";
import { generate } from "../../src/nn/generate.ts";
import { cachedForward, KVCache } from "../../src/nn/kv_cache.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Embedding } from "../../src/nn/embedding.ts";
import { referenceGreedy, TINY, writeTinyGPT2 } from "./_gpt2_reference.ts";

const be = new CpuBackend();
const cfg = { vocabSize: 23, seqLen: 40, dim: 16, heads: 4, layers: 2, seed: 5 };

Deno.test("generate: greedy from a GPT-2 folder equals an independent float64 GPT-2 token for token, with and without the cache", async () => {
  const dir = await Deno.makeTempDir({ prefix: "conveyor_gen_" });
  try {
    const t = await writeTinyGPT2(dir);
    const { model } = await loadGPT2(dir, be);
    const prompt = [11, 200, 3, 45, 45, 7];
    const want = referenceGreedy(t, TINY, prompt, 12);
    for (const cache of [true, false]) {
      const r = await generate(model, prompt, { maxTokens: 12, temperature: 0, cache });
      assert.deepEqual(r.ids, [want], `cache ${cache}`);
      assert.equal(r.tokens, 12);
      assert.ok(r.tokensPerSecond > 0);
    }
    model.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

for (const split of ["blocks", "halves"] as const) {
  Deno.test(`cachedForward (${split}): the prompt then one position at a time gives the logits of the whole sequence's forward (tol 1e-5)`, async () => {
    const gpt = createTinyGPT({ ...cfg, split }, be);
    const ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3];
    const full = await gpt.forward(be.fromData(Float32Array.from(ids), [1, ids.length]), {
      save: false,
    }).toArray();
    const cache = new KVCache();
    const got: number[] = [];
    got.push(
      ...await cachedForward(gpt, be.fromData(Float32Array.from(ids.slice(0, 4)), [1, 4]), cache)
        .toArray(),
    );
    for (let i = 4; i < ids.length; i++) {
      got.push(
        ...await cachedForward(gpt, be.fromData(new Float32Array([ids[i]]), [1, 1]), cache)
          .toArray(),
      );
    }
    assert.equal(cache.length, ids.length);
    assert.ok(cache.bytes > 0);
    assert.equal(got.length, full.length);
    const worst = got.reduce((m, v, i) => Math.max(m, Math.abs(v - full[i])), 0);
    assert.ok(worst < 1e-5, `worst ${worst}`);
    cache.dispose();
    assert.equal(cache.bytes, 0);
    gpt.dispose();
  });
}

Deno.test("generate: seeded sampling is reproducible, independent of batching; another seed differs; topK 1 is greedy; stop ends a prompt with its id", async () => {
  const gpt = createTinyGPT(cfg, be);
  const opts = { maxTokens: 12, temperature: 1.5, topK: 10, topP: 0.95, seed: 3 };
  const a = await generate(gpt, [[1, 2], [7, 8, 9]], opts);
  const b = await generate(gpt, [[1, 2], [7, 8, 9]], opts);
  assert.deepEqual(a.ids, b.ids);
  const alone = await generate(gpt, [1, 2], opts);
  assert.deepEqual(alone.ids[0], a.ids[0]);
  const other = await generate(gpt, [[1, 2], [7, 8, 9]], { ...opts, seed: 4 });
  assert.notDeepEqual(other.ids, a.ids);
  const greedy = await generate(gpt, [1, 2], { maxTokens: 12, temperature: 0 });
  const top1 = await generate(gpt, [1, 2], { maxTokens: 12, temperature: 2, topK: 1, seed: 9 });
  assert.deepEqual(top1.ids, greedy.ids);
  const stopAt = greedy.ids[0][4];
  const first = greedy.ids[0].indexOf(stopAt);
  const stopped = await generate(gpt, [1, 2], { maxTokens: 12, temperature: 0, stop: [stopAt] });
  assert.deepEqual(stopped.ids[0], greedy.ids[0].slice(0, first + 1));
  const seen: [number, number][] = [];
  await generate(gpt, [[1], [2]], {
    maxTokens: 2,
    temperature: 0,
    onToken: (p, id) => void seen.push([p, id]),
  });
  assert.equal(seen.length, 4);
  gpt.dispose();
});

Deno.test("generate: refuses bad options and prompts before any forward, naming the value (and a misspelt key's intended name)", async () => {
  const gpt = createTinyGPT(cfg, be);
  const cases: [unknown, unknown, RegExp][] = [
    [[1], { maxTokens: 0 }, /maxTokens must be an integer ≥ 1, got 0/],
    [[1], { maxToken: 3 }, /unknown option maxToken: did you mean maxTokens\?/],
    [[1], { maxTokens: 3, temperature: -1 }, /temperature must be a finite number ≥ 0, got -1/],
    [[1], { maxTokens: 3, topP: 0 }, /topP must be in \(0, 1\], got 0/],
    [[1], { maxTokens: 3, topK: 1.5 }, /topK must be an integer ≥ 1, got 1\.5/],
    [[1, 23], { maxTokens: 3 }, /prompt 0\[1\] must be a token id in \[0, 22\], got 23/],
    [[[1], []], { maxTokens: 3 }, /prompt 1 must be a non-empty array/],
    [
      new Array(38).fill(1),
      { maxTokens: 3 },
      /prompt 0 has 38 tokens; with maxTokens = 3 that is 41 positions, past the model's context of 40/,
    ],
  ];
  for (const [p, o, re] of cases) {
    await assert.rejects(() => generate(gpt, p as number[], o as { maxTokens: number }), re);
  }
  const odd = new Sequential([new Embedding(be, 5, 4), new Linear(be, 4, 5)]);
  await assert.rejects(
    () => generate(odd, [1], { maxTokens: 2 }),
    /model layer 0 \(Embedding\) has no cached forward.*cache: false/,
  );
  assert.equal(
    (await generate(odd, [1], { maxTokens: 2, cache: false, temperature: 0 })).tokens,
    2,
  );
  odd.dispose();
  gpt.dispose();
});
