import assert from "node:assert/strict";
import { loadGPT2 } from "../../src/nn/gpt2.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { writeTinyGPT2 } from "../nn/_gpt2_reference.ts";

const script = new URL("../../examples/finetune_gpt2.ts", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

Deno.test("finetune_gpt2 example: fine-tunes a tiny GPT-2-format folder on 2 ranks (the loss falls), samples, and writes a folder that loads", async () => {
  const dir = await Deno.makeTempDir({ prefix: "conveyor_ft_" });
  try {
    await writeTinyGPT2(`${dir}/gpt2`);
    await Deno.writeTextFile(
      `${dir}/text.txt`,
      "the quick brown fox jumps over the lazy dog. ".repeat(50),
    );
    const r = await run([
      "--model",
      `${dir}/gpt2`,
      "--text",
      `${dir}/text.txt`,
      "--steps",
      "12",
      "--lr",
      "0.01",
      "--seq-len",
      "16",
      "--backend",
      "cpu",
      "--max-tokens",
      "10",
      "--save",
      `${dir}/out`,
    ]);
    assert.equal(r.code, 0, r.err);
    const losses = [...r.out.matchAll(/^step \d+\/12 {2}loss (\d+\.\d{4})$/gm)].map((m) =>
      Number(m[1])
    );
    assert.equal(losses.length, 12, r.out);
    assert.ok(losses[11] < losses[0], `loss falls: ${losses}`);
    assert.match(r.out, /pipeline: 1f1b, 2 ranks, 4 micro-batches/);
    const sample = r.out.match(/^sample: (".*")$/m);
    assert.ok(sample, r.out);
    assert.ok(JSON.parse(sample[1]).startsWith("the quick brown fox "));
    assert.match(r.out, /^10 tokens at [\d.]+ tokens\/s$/m);
    const { model, tokenizer } = await loadGPT2(`${dir}/out`, new CpuBackend());
    assert.ok(tokenizer !== null);
    model.dispose();
    const bad = await run(["--model", `${dir}/gpt2`]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--model DIR and --text FILE are required/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
