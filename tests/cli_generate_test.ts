import assert from "node:assert/strict";
import { cli } from "./_cli.ts";
import { BPETokenizer } from "../src/nn/bpe_tokenizer.ts";
import { loadGPT2 } from "../src/nn/gpt2.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { referenceGreedy, TINY, writeTinyGPT2 } from "./nn/_gpt2_reference.ts";

const dir = await Deno.makeTempDir({ prefix: "conveyor_cli_gen_" });
const tensors = await writeTinyGPT2(`${dir}/gpt2`);
await writeTinyGPT2(`${dir}/bare`, TINY, 1, false);
const tok = await BPETokenizer.fromFolder(`${dir}/gpt2`);
const text = "the quick brown fox jumps over the lazy dog and then the fox sleeps. ".repeat(30);
await Deno.writeTextFile(`${dir}/text.txt`, text);

function lastJson(out: string): Record<string, unknown> {
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

Deno.test("cli generate --json: the last line is exactly {ids (generated only), text, tokensPerSecond}; greedy equals an independent float64 GPT-2 on one device and on 2 ranks, with and without the cache", async () => {
  const prompt = "the quick brown";
  const want = referenceGreedy(tensors, TINY, tok.encode(prompt), 9);
  for (
    const extra of [[], ["--no-cache"], ["--ranks", "2"], [
      "--ranks",
      "2",
      "--schedule",
      "zb-v",
      "--no-cache",
    ]]
  ) {
    const r = await cli(
      "generate",
      "--model",
      `${dir}/gpt2`,
      "--prompt",
      prompt,
      "--max-tokens",
      "9",
      "--temperature",
      "0",
      "--json",
      ...extra,
    );
    assert.equal(r.code, 0, r.err);
    const line = lastJson(r.out);
    assert.deepEqual(Object.keys(line), ["ids", "text", "tokensPerSecond"], extra.join(" "));
    assert.deepEqual(line.ids, want, extra.join(" "));
    assert.equal(line.text, tok.decode(want));
    assert.ok(typeof line.tokensPerSecond === "number" && line.tokensPerSecond > 0);
  }
  // Without a tokenizer: ids in, ids out, no "text".
  const bare = await cli(
    "generate",
    "--model",
    `${dir}/bare`,
    "--prompt-ids",
    "5,17,250",
    "--max-tokens",
    "4",
    "--temperature",
    "0",
    "--json",
  );
  assert.equal(bare.code, 0, bare.err);
  assert.deepEqual(Object.keys(lastJson(bare.out)), ["ids", "tokensPerSecond"]);
  assert.deepEqual(lastJson(bare.out).ids, referenceGreedy(tensors, TINY, [5, 17, 250], 4));
  // Seeded sampling: the same seed, the same ids.
  const s = (seed: string) =>
    cli(
      "generate",
      "--model",
      `${dir}/gpt2`,
      "--prompt-ids",
      "1,2",
      "--max-tokens",
      "12",
      "--top-k",
      "20",
      "--seed",
      seed,
      "--json",
    );
  const [a, b, c] = [await s("3"), await s("3"), await s("4")];
  assert.deepEqual(lastJson(a.out).ids, lastJson(b.out).ids);
  assert.notDeepEqual(lastJson(a.out).ids, lastJson(c.out).ids);
});

Deno.test("cli generate: a bad command line exits 2 naming the flag, before any work", async () => {
  const cases: [string[], RegExp][] = [
    [["--prompt-ids", "1", "--max-tokens", "2"], /needs --model DIR/],
    [["--model", `${dir}/gpt2`, "--max-tokens", "2"], /--prompt TEXT or --prompt-ids/],
    [
      ["--model", `${dir}/gpt2`, "--prompt", "a", "--prompt-ids", "1", "--max-tokens", "2"],
      /one of them/,
    ],
    [
      ["--model", `${dir}/gpt2`, "--prompt-ids", "1,,2", "--max-tokens", "2"],
      /--prompt-ids must be token ids/,
    ],
    [
      ["--model", `${dir}/bare`, "--prompt", "hi", "--max-tokens", "2"],
      /vocab\.json \+ merges\.txt.*--prompt-ids/,
    ],
    [
      ["--model", `${dir}/gpt2`, "--prompt-ids", "1", "--max-tokens", "200"],
      /past the model's context of 96/,
    ],
    [
      ["--model", `${dir}/gpt2`, "--prompt-ids", "300", "--max-tokens", "2"],
      /must be a token id in \[0, 299\], got 300/,
    ],
    [
      ["--model", `${dir}/gpt2`, "--prompt-ids", "1", "--max-tokens", "2", "--temperature", "-1"],
      /--temperature must be a number >= 0/,
    ],
    [
      ["--model", `${dir}/nowhere`, "--prompt-ids", "1", "--max-tokens", "2"],
      /--model .*nowhere: .*cannot read config\.json/,
    ],
    [
      ["--model", `${dir}/gpt2`, "--prompt-ids", "1", "--max-tokens", "2", "--max-token", "3"],
      /max-token/,
    ],
  ];
  for (const [args, re] of cases) {
    const r = await cli("generate", ...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
    assert.match(r.err, re);
  }
});

Deno.test("cli train --model DIR --text FILE --save-model OUT fine-tunes a GPT-2-format folder on 2 ranks (1f1b: the tied table on both) and writes one that loads and generates; the built-in GPT trains on --text with --tie-embeddings", async () => {
  const out = `${dir}/tuned`;
  const r = await cli(
    "train",
    "--model",
    `${dir}/gpt2`,
    "--text",
    `${dir}/text.txt`,
    "--schedule",
    "1f1b",
    "--ranks",
    "2",
    "--microbatches",
    "2",
    "--steps",
    "6",
    "--backend",
    "cpu",
    "--in-process",
    "--lr",
    "0.01",
    "--save-model",
    out,
    "--json",
  );
  assert.equal(r.code, 0, r.err);
  const lines = r.out.trim().split("\n").map((l) => JSON.parse(l));
  const losses = lines.slice(0, 6).map((l) => l.loss as number);
  assert.ok(losses[5] < losses[0], `loss falls: ${losses}`);
  const { model, tokenizer } = await loadGPT2(out, new CpuBackend());
  assert.equal(tokenizer?.vocabSize, tok.vocabSize);
  model.dispose();
  const g = await cli("generate", "--model", out, "--prompt", "the", "--max-tokens", "3", "--json");
  assert.equal(g.code, 0, g.err);
  const built = await cli(
    "train",
    "--text",
    `${dir}/text.txt`,
    "--tie-embeddings",
    "--schedule",
    "zb-v",
    "--ranks",
    "2",
    "--microbatches",
    "4",
    "--steps",
    "2",
    "--backend",
    "cpu",
    "--in-process",
    "--save-model",
    `${dir}/tiny`,
  );
  assert.equal(built.code, 0, built.err);
  assert.match(built.out, new RegExp(`vocabulary ${new Set(text).size}\\b`)); // the text's characters
  assert.match(built.out, /model written to .*tiny \(GPT-2 format\)/);
  const bad = await cli(
    "train",
    "--model",
    `${dir}/gpt2`,
    "--schedule",
    "1f1b",
    "--ranks",
    "2",
    "--microbatches",
    "2",
  );
  assert.equal(bad.code, 2);
  assert.match(bad.err, /needs --text FILE/);
  const untied = await cli(
    "train",
    "--save-model",
    `${dir}/x`,
    "--schedule",
    "1f1b",
    "--ranks",
    "1",
    "--microbatches",
    "1",
  );
  assert.equal(untied.code, 2);
  assert.match(untied.err, /needs --model DIR or --tie-embeddings/);
});

globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
