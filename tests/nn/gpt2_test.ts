import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { loadGPT2, parseGPT2Config, saveGPT2 } from "../../src/nn/gpt2.ts";
import { encodeSafetensors, parseSafetensors } from "../../src/nn/safetensors.ts";
import {
  configJson,
  gpt2Tensors,
  referenceLogits,
  TINY,
  writeTinyGPT2,
} from "./_gpt2_reference.ts";

const be = new CpuBackend();

async function tmp(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "conveyor_gpt2_" });
}

Deno.test("loadGPT2: a Hugging Face GPT-2 folder (transformer. prefix, Conv1D [in, out], old attn buffers, lm_head = wte) gives the logits of an independent float64 GPT-2 (tol 1e-4 of the logits' scale)", async () => {
  const dir = await tmp();
  try {
    const t = await writeTinyGPT2(dir);
    const { model, config, tokenizer } = await loadGPT2(dir, be);
    assert.equal(config.nLayer, TINY.layers);
    assert.ok(tokenizer !== null);
    assert.deepEqual(model.layers.map((l) => l.kind), [
      "TokenPositionEmbedding",
      "TransformerBlock",
      "TransformerBlock",
      "LayerNorm",
      "TiedHead",
    ]);
    const ids = [5, 17, 250, 3, 99, 0, 42, 7, 7, 120];
    const x = be.fromData(Float32Array.from(ids), [1, ids.length]);
    const got = await model.forward(x, { save: false }).toArray();
    const want = referenceLogits(t, TINY, ids);
    let worst = 0, scale = 0;
    want.forEach((row, i) =>
      row.forEach((v, j) => {
        worst = Math.max(worst, Math.abs(got[i * TINY.vocab + j] - v));
        scale = Math.max(scale, Math.abs(v));
      })
    );
    assert.ok(scale > 1, `logits of spread ${scale}`);
    assert.ok(worst <= 1e-4 * scale, `worst ${worst} of scale ${scale}`);
    model.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("saveGPT2: writes GPT-2's names and layout back (no prefix, Conv1D [in, out], no lm_head), equal to the file read; it loads again", async () => {
  const dir = await tmp(), out = await tmp();
  try {
    const t = await writeTinyGPT2(dir);
    const { model, tokenizer } = await loadGPT2(dir, be);
    await saveGPT2(out, model, {
      tokenizerFiles: {
        vocabJson: await Deno.readTextFile(`${dir}/vocab.json`),
        mergesTxt: await Deno.readTextFile(`${dir}/merges.txt`),
      },
    });
    const file = parseSafetensors(await Deno.readFile(`${out}/model.safetensors`));
    assert.deepEqual([...file.tensors.keys()].sort(), [...t.keys()].sort());
    for (const [name, e] of t) {
      assert.deepEqual(file.tensors.get(name)!.shape, e.shape, name);
      assert.deepEqual(file.tensors.get(name)!.data, e.data, name);
    }
    const cfg = JSON.parse(await Deno.readTextFile(`${out}/config.json`));
    assert.deepEqual(parseGPT2Config(cfg), parseGPT2Config(configJson(TINY)));
    const again = await loadGPT2(out, be);
    assert.equal(again.tokenizer!.encode("the fox").length, tokenizer!.encode("the fox").length);
    again.model.dispose();
    model.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(out, { recursive: true });
  }
});

async function refused(
  change: (
    cfg: Record<string, unknown>,
    t: Map<string, { shape: number[]; data: Float32Array }>,
  ) => void,
  pattern: RegExp,
  kind: typeof RangeError | typeof TypeError = RangeError,
) {
  const dir = await tmp();
  try {
    const cfg = configJson(TINY);
    const t = gpt2Tensors(TINY);
    change(cfg, t);
    await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(cfg));
    await Deno.writeFile(
      `${dir}/model.safetensors`,
      encodeSafetensors([...t].map(([name, e]) => ({ name, ...e }))),
    );
    const before = be.memory.liveBytes;
    await assert.rejects(
      () => loadGPT2(dir, be),
      (e: Error) => e instanceof kind && pattern.test(e.message),
    );
    assert.equal(be.memory.liveBytes, before, "a refused folder builds nothing");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("loadGPT2 refuses, naming the field or tensor, before building anything: another model type, activation, untied embeddings, a missing or misshapen tensor, a foreign tensor, lm_head ≠ wte", async () => {
  await refused((c) => void (c.model_type = "llama"), /model_type must be "gpt2", got "llama"/);
  await refused(
    (c) => void (c.activation_function = "relu"),
    /activation_function must be "gelu_new".*got "relu"/,
  );
  await refused(
    (c) => void (c.tie_word_embeddings = false),
    /tie_word_embeddings must be true, got false/,
  );
  await refused((c) => void (c.n_head = 3), /n_head = 3 must divide n_embd = 16/);
  await refused((c) => void delete c.n_layer, /n_layer must be a positive integer, got undefined/);
  await refused(
    (_, t) => void t.delete("h.1.mlp.c_fc.bias"),
    /tensor h\.1\.mlp\.c_fc\.bias is missing/,
  );
  await refused((_, t) => {
    const w = t.get("h.0.attn.c_attn.weight")!;
    t.set("h.0.attn.c_attn.weight", { shape: [48, 16], data: w.data });
  }, /h\.0\.attn\.c_attn\.weight must have shape \[16, 48\] for this config, got \[48, 16\]/);
  await refused(
    (_, t) => void t.set("h.2.ln_1.weight", { shape: [16], data: new Float32Array(16) }),
    /tensor h\.2\.ln_1\.weight is not part of GPT-2's layout/,
  );
  await refused((_, t) => {
    const w = t.get("wte.weight")!;
    const d = w.data.slice();
    d[3] += 1;
    t.set("lm_head.weight", { shape: w.shape, data: d });
  }, /lm_head\.weight differs from wte\.weight/);
  const dir = await tmp();
  await assert.rejects(
    () => loadGPT2(dir, be),
    (e: Error) => e instanceof TypeError && /cannot read config\.json/.test(e.message),
  );
  await Deno.remove(dir);
});
