/**
 * Fine-tunes a GPT-2-format model (a Hugging Face folder: config.json,
 * model.safetensors, vocab.json, merges.txt) on a text file across 2
 * pipeline ranks, then samples from it with the key/value cache, and
 * optionally writes the result back as a GPT-2 folder.
 *
 *   deno run -A examples/finetune_gpt2.ts --model DIR --text FILE
 *     [--steps 20] [--ranks 2] [--schedule 1f1b] [--microbatches 4]
 *     [--batch 8] [--seq-len 64] [--lr 0.0001] [--seed 1]
 *     [--backend auto|cpu|webgpu] [--prompt TEXT] [--max-tokens 40]
 *     [--temperature 0.8] [--top-k 40] [--save OUT]
 *
 * The token embedding and the output head share one table (GPT-2 ties
 * them): with the first and last stage on two ranks (1f1b), each holds a
 * copy and their gradients are summed before either steps.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { CpuBackend, PipelineParallelModel, type ScheduleName } from "../mod.ts";
import { loadGPT2, saveGPT2 } from "../format.ts";
import { Rng, sampleBatch } from "../data.ts";

const USAGE = `Usage: deno run -A examples/finetune_gpt2.ts --model DIR --text FILE [options]
  --model DIR        a GPT-2-format folder (config.json, model.safetensors, vocab.json, merges.txt)
  --text FILE        the UTF-8 text to fine-tune on
  --steps N          training steps (default 20)
  --ranks P          pipeline ranks (default 2)
  --schedule NAME    pipeline schedule (default 1f1b)
  --microbatches M   micro-batches per step (default 4)
  --batch N          sequences per step (default 8)
  --seq-len N        tokens per sequence (default 64, at most the model's n_positions)
  --lr X             AdamW learning rate (default 0.0001)
  --seed N           seed of the batches and the sampling (default 1)
  --backend KIND     auto | cpu | webgpu (default auto)
  --prompt TEXT      start of the sample (default: the text's first 20 characters)
  --max-tokens N     tokens to sample after training (default 40)
  --temperature T    sampling temperature, 0 = greedy (default 0.8)
  --top-k K          sample among the K most likely tokens (default 40)
  --save OUT         write the fine-tuned model as a GPT-2 folder OUT`;

function fail(msg: string): never {
  console.error(`finetune_gpt2: ${msg}\n${USAGE}`);
  Deno.exit(2);
}

function num(name: string, v: string | undefined, fallback: number, min: number, int = true) {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || (int && !Number.isInteger(n))) {
    fail(`--${name} must be ${int ? "an integer" : "a number"} ≥ ${min}, got ${v}`);
  }
  return n;
}

const strings = [
  "model",
  "text",
  "steps",
  "ranks",
  "schedule",
  "microbatches",
  "batch",
  "seq-len",
  "lr",
  "seed",
  "backend",
  "prompt",
  "max-tokens",
  "temperature",
  "top-k",
  "save",
] as const;
let a: Partial<Record<(typeof strings)[number], string>>;
try {
  a = parseArgs({
    args: Deno.args,
    options: Object.fromEntries(strings.map((s) => [s, { type: "string" }])),
  }).values as typeof a;
} catch (e) {
  fail((e as Error).message);
}
if (a.model === undefined || a.text === undefined) fail("--model DIR and --text FILE are required");
const steps = num("steps", a.steps, 20, 1);
const ranks = num("ranks", a.ranks, 2, 1);
const microBatches = num("microbatches", a.microbatches, 4, 1);
const batch = num("batch", a.batch, 8, microBatches);
const lr = num("lr", a.lr, 1e-4, 0, false);
const seed = num("seed", a.seed, 1, 0);
const maxTokens = num("max-tokens", a["max-tokens"], 40, 1);
const temperature = num("temperature", a.temperature, 0.8, 0, false);
const topK = num("top-k", a["top-k"], 40, 1);
const backend = a.backend ?? "auto";
if (backend !== "auto" && backend !== "cpu" && backend !== "webgpu") {
  fail(`--backend must be auto, cpu or webgpu, got ${backend}`);
}

// Read and check the folder and the text before any rank starts.
const { model: net, config, tokenizer } = await loadGPT2(a.model, new CpuBackend());
if (tokenizer === null) fail(`${a.model} has no vocab.json + merges.txt`);
const seqLen = num("seq-len", a["seq-len"], Math.min(64, config.nPositions), 1);
if (seqLen > config.nPositions) {
  fail(`--seq-len ${seqLen} is past n_positions ${config.nPositions}`);
}
const text = await Deno.readTextFile(a.text);
const tokens = tokenizer.encode(text);
if (tokens.length <= seqLen) fail(`${a.text} has ${tokens.length} tokens, not more than --seq-len`);
console.log(
  `GPT-2 model: ${config.nLayer} blocks, dim ${config.nEmbd}, ${config.nHead} heads, ` +
    `vocabulary ${config.vocabSize}; ${tokens.length} tokens of text`,
);

await using model = await PipelineParallelModel.create({
  model: net,
  schedule: (a.schedule ?? "1f1b") as ScheduleName,
  ranks,
  microBatches,
  loss: "cross-entropy",
  optimizer: { kind: "adamw", lr, weightDecay: 0 },
  backend,
});
net.dispose();
console.log(
  `pipeline: ${model.schedule.name}, ${model.ranks} ranks, ${microBatches} micro-batches`,
);

const rng = new Rng(seed);
function* batches() {
  for (let i = 0; i < steps; i++) {
    const b = sampleBatch(tokens, batch, seqLen, rng);
    yield { inputs: b.ids, shape: b.shape, targets: b.targets };
  }
}
await model.train(batches(), {
  onStep: (s) => console.log(`step ${s.step + 1}/${steps}  loss ${s.loss.toFixed(4)}`),
});

const prompt = tokenizer.encode(a.prompt ?? text.slice(0, 20));
const room = config.nPositions - prompt.length;
const r = await model.generate(prompt, {
  maxTokens: Math.max(1, Math.min(maxTokens, room)),
  temperature,
  topK,
  seed,
});
console.log(`sample: ${JSON.stringify(tokenizer.decode([...prompt, ...r.ids[0]]))}`);
console.log(`${r.tokens} tokens at ${r.tokensPerSecond.toFixed(1)} tokens/s`);

if (a.save !== undefined) {
  const [vocabJson, mergesTxt] = await Promise.all([
    Deno.readTextFile(`${a.model}/vocab.json`),
    Deno.readTextFile(`${a.model}/merges.txt`),
  ]);
  await saveGPT2(a.save, await model.saveSafetensors(), {
    config,
    tokenizerFiles: { vocabJson, mergesTxt },
  });
  console.log(`model written to ${a.save}`);
}
