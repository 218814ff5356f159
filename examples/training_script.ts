/**
 * A training script as the README's "training script" section shows it: the
 * tiny GPT across 2 pipeline ranks (ZB-H1), AdamW with a warmup-cosine
 * learning rate, batches streamed from a generator, a progress bar, a
 * metrics log, a validation loss every 20 steps, a checkpoint every 20
 * steps and at the end (or at a Ctrl-C) that the next run resumes from
 * (bit for bit: weights, AdamW state, step count, batch order), and
 * `await using` to end the workers.
 *
 * ```sh
 * deno run --allow-read=. --allow-write=. examples/training_script.ts 40   # steps 1–40, then a checkpoint
 * deno run --allow-read=. --allow-write=. examples/training_script.ts      # resumes: steps 41–60
 * ```
 *
 * @module
 */

import { CpuBackend, createTinyGPT, PipelineParallelModel, Rng } from "../mod.ts";
import { MetricsLogger, ModelCheckpoint, ProgressBar } from "../callbacks.ts";
import { CharTokenizer, sampleBatch, TINY_CORPUS } from "../data.ts";

const STEPS = 60, EVAL_EVERY = 20;
const stopAt = Number(Deno.args[0] ?? STEPS);
const CHECKPOINT = Deno.args[1] ?? "tiny_gpt.ckpt.safetensors";

const tok = CharTokenizer.fromText(TINY_CORPUS);
const tokens = tok.encode(TINY_CORPUS);
const validation = sampleBatch(tokens, 16, 32, new Rng(0)); // a TokenBatch is a training batch

const net = createTinyGPT(
  { vocabSize: tok.vocabSize, seqLen: 32, dim: 32, heads: 4, layers: 2, seed: 1 },
  new CpuBackend(),
);
const resume = await Deno.stat(CHECKPOINT).then(() => CHECKPOINT, () => undefined);
await using model = await PipelineParallelModel.create({
  model: net,
  schedule: "zb-h1",
  ranks: 2,
  microBatches: 4,
  loss: "cross-entropy",
  backend: "cpu", // or "auto": WebGPU in each worker on a GPU, else the CPU
  optimizer: {
    kind: "adamw",
    lr: 3e-3,
    lrSchedule: { kind: "warmup-cosine", warmupSteps: 10, decaySteps: STEPS - 10, minLr: 3e-4 },
  },
  ...(resume === undefined ? {} : { resume }), // weights, AdamW state, step count, data
});
net.dispose();

// The batch order continues where the checkpoint left it.
const saved = model.resumedFrom?.data.rng;
const rng = saved === undefined ? new Rng(2) : Rng.fromState(JSON.parse(saved));
function* batches() {
  for (let s = model.stepCount; s < Math.min(stopAt, STEPS); s++) {
    yield sampleBatch(tokens, 16, 32, rng); // drawn as the steps need them
  }
}
const data = () => ({ rng: JSON.stringify(rng.state()) }); // the batch order, for checkpoints

// Ctrl-C: finish the window, save below and end (a second Ctrl-C ends at once).
const stop = new AbortController();
const interrupt = () => stop.signal.aborted ? Deno.exit(130) : stop.abort();
Deno.addSignalListener("SIGINT", interrupt);
await model.train(batches(), {
  signal: stop.signal,
  validation: { batch: validation, every: EVAL_EVERY }, // forward only, after steps 20, 40, 60
  callbacks: [
    new ProgressBar({ total: STEPS, every: 10 }), // a bar on a terminal, else a line per 10 steps
    new MetricsLogger("metrics.jsonl", { append: resume !== undefined }), // a JSON line per step
    new ModelCheckpoint(model, { path: CHECKPOINT, every: EVAL_EVERY, data }), // at exact steps
  ],
});
Deno.removeSignalListener("SIGINT", interrupt);
await model.saveCheckpoint(CHECKPOINT, { data: data() });
console.log(`checkpoint at step ${model.stepCount}: ${CHECKPOINT}`);
