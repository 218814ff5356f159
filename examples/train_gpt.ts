/**
 * Trains a tiny character-level GPT on the text the project ships (or on
 * any text file: `--text FILE`), on WebGPU when an adapter exists (else the
 * CPU backend), with AdamW, showing the loss per step, then samples some
 * text from the trained model.
 *
 *   deno run -A examples/train_gpt.ts [--text FILE] [--steps 200]
 *     [--backend auto|cpu|webgpu] [--seed 1] [--lr 0.01] [--batch 8]
 *     [--seq-len 32] [--dim 32] [--heads 4] [--layers 2] [--sample 160]
 *     [--prompt TEXT] [--temperature 1]
 *
 * The first loss is close to ln(vocabulary size): the untrained model
 * spreads its guess evenly over every character.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createTinyGPT, Rng } from "../mod.ts";
import { ProgressBar } from "../callbacks.ts";
import { createBackend } from "../tensor.ts";
import { AdamW, crossEntropyLoss } from "../nn.ts";
import { sampleBatch } from "../data.ts";
import { loadText, sampleText } from "./_text.ts";

const USAGE = `Usage: deno run -A examples/train_gpt.ts [options]
  --text FILE      train on this text file (default: the built-in corpus)
  --steps N        training steps (default 200)
  --backend KIND   auto | cpu | webgpu (default auto)
  --seed N         seed of the weights and of the batches (default 1)
  --lr X           AdamW learning rate (default 0.01)
  --batch N        sequences per step (default 8)
  --seq-len N      characters per sequence (default 32)
  --dim N          model width (default 32)
  --heads N        attention heads (default 4)
  --layers N       Transformer blocks (default 2)
  --sample N       characters to generate after training (default 160, 0 = none)
  --prompt TEXT    start of the sample (default "The ", or the file's first 4 characters)
  --temperature T  sampling temperature, 0 = always the most likely (default 1)`;

function fail(msg: string): never {
  console.error(`train_gpt: ${msg}\n${USAGE}`);
  Deno.exit(2);
}

function intArg(name: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) fail(`--${name} must be an integer ≥ ${min}, got ${v}`);
  return n;
}

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      args: Deno.args,
      options: {
        steps: { type: "string", default: "200" },
        backend: { type: "string", default: "auto" },
        seed: { type: "string", default: "1" },
        lr: { type: "string", default: "0.01" },
        batch: { type: "string", default: "8" },
        "seq-len": { type: "string", default: "32" },
        dim: { type: "string", default: "32" },
        heads: { type: "string", default: "4" },
        layers: { type: "string", default: "2" },
        sample: { type: "string", default: "160" },
        text: { type: "string" },
        prompt: { type: "string" },
        temperature: { type: "string", default: "1" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }));
  } catch (e) {
    fail((e as Error).message);
  }
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const kind = values.backend;
  if (kind !== "auto" && kind !== "cpu" && kind !== "webgpu") {
    fail(`--backend must be auto, cpu or webgpu, got ${kind}`);
  }
  const steps = intArg("steps", values.steps, 1);
  const seed = intArg("seed", values.seed, -(2 ** 31));
  const lr = Number(values.lr);
  if (!Number.isFinite(lr) || lr <= 0) fail(`--lr must be a positive number, got ${values.lr}`);
  const batch = intArg("batch", values.batch, 1);
  const seqLen = intArg("seq-len", values["seq-len"], 1);
  const dim = intArg("dim", values.dim, 1);
  const heads = intArg("heads", values.heads, 1);
  const layers = intArg("layers", values.layers, 1);
  const sample = intArg("sample", values.sample, 0);
  if (dim % heads !== 0) fail(`--heads must divide --dim, got heads ${heads} and dim ${dim}`);
  const temperature = Number(values.temperature);
  if (!Number.isFinite(temperature) || temperature < 0) {
    fail(`--temperature must be a number ≥ 0, got ${values.temperature}`);
  }
  let corpus;
  try {
    corpus = await loadText(values.text, seqLen + 1);
  } catch (e) {
    fail((e as Error).message);
  }
  const tok = corpus.tokenizer, data = corpus.tokens;
  const prompt = values.prompt ?? corpus.defaultPrompt;
  const badChar = [...prompt].find((c) => !tok.vocab.includes(c));
  if (badChar !== undefined) {
    fail(`--prompt has ${JSON.stringify(badChar)}, which is not in the text`);
  }
  if (prompt === "") fail("--prompt must not be empty");

  const be = await createBackend(kind);
  const model = createTinyGPT({ vocabSize: tok.vocabSize, seqLen, dim, heads, layers, seed }, be);
  const nParams = model.parameters().reduce((s, p) => s + p.value.size, 0);
  console.log(
    `tiny GPT: ${layers} blocks, dim ${dim}, ${heads} heads, ${nParams} parameters; ` +
      `${corpus.source}: ${data.length} characters, vocabulary ${tok.vocabSize} (ln V = ${
        Math.log(tok.vocabSize).toFixed(3)
      })`,
  );
  console.log(
    `backend: ${be.name} (${be.description}); batch ${batch} × ${seqLen}, AdamW lr ${lr}`,
  );

  const opt = new AdamW(model.parameters(), { lr, weightDecay: 0 });
  const rng = new Rng(seed + 1);
  const progress = new ProgressBar({ total: steps, every: 1 });
  const losses: number[] = [];
  const t0 = performance.now();
  // The loss of step s is read while step s + 1 is queued, so on a GPU the
  // read-back overlaps the next step's compute instead of stalling it.
  let pending: Promise<void> | null = null;
  for (let s = 0; s < steps; s++) {
    const b = sampleBatch(data, batch, seqLen, rng);
    const x = be.fromData(b.ids, b.shape), t = be.fromData(b.targets, b.shape);
    const y = model.forward(x);
    const { loss, grad } = crossEntropyLoss(y, t);
    model.zeroGrad();
    model.backward(grad).dispose();
    opt.step();
    for (const z of [x, t, y, grad]) z.dispose();
    be.flush();
    if (pending) await pending;
    pending = loss.toArray().then((v) => {
      loss.dispose();
      losses.push(v[0]);
      const ms = (performance.now() - t0) / losses.length;
      progress.update(losses.length, `loss ${v[0].toFixed(4)}  ${ms.toFixed(0)} ms/step`);
    });
  }
  await pending;
  progress.done();
  const secs = (performance.now() - t0) / 1000;
  const tail = losses.slice(-10);
  const avg = tail.reduce((a, b) => a + b, 0) / tail.length;
  console.log(
    `loss ${losses[0].toFixed(3)} → ${avg.toFixed(3)} (mean of the last ${tail.length}) ` +
      `in ${secs.toFixed(1)} s, ${(1000 * secs / steps).toFixed(0)} ms/step`,
  );
  if (sample > 0) {
    const logits = async (ids: Float32Array, shape: [number, number]) => {
      const x = be.fromData(ids, shape);
      const y = model.forward(x, { save: false });
      x.dispose();
      const out = await y.toArray();
      y.dispose();
      return out;
    };
    const text = await sampleText(logits, tok, {
      prompt,
      n: sample,
      seqLen,
      temperature,
      rng: new Rng(seed + 2),
    });
    console.log(`sample: ${JSON.stringify(text)}`);
  }
  opt.dispose();
  model.dispose();
  await be.close();
}

if (import.meta.main) await main();
