/**
 * A training script as the README's "training script" section shows it: the
 * tiny GPT across 2 pipeline ranks (ZB-H1), AdamW with a warmup-cosine
 * learning rate, batches streamed from a generator, a line per step, a
 * validation loss every 20 steps, a checkpoint at the end that the next run
 * resumes from (bit for bit: weights, AdamW state, step count, batch order),
 * and `await using` to end the workers.
 *
 * ```sh
 * deno run --allow-read=. --allow-write=. examples/training_script.ts 40   # steps 1–40, then a checkpoint
 * deno run --allow-read=. --allow-write=. examples/training_script.ts      # resumes: steps 41–60
 * ```
 *
 * @module
 */

import {
  CharTokenizer,
  CpuBackend,
  createTinyGPT,
  PipelineParallelModel,
  Rng,
  sampleBatch,
  TINY_CORPUS,
  type TokenBatch,
} from "../mod.ts";

const STEPS = 60, EVAL_EVERY = 20; // a multiple of the stream's window (4): exact step
const stopAt = Number(Deno.args[0] ?? STEPS);
const CHECKPOINT = Deno.args[1] ?? "tiny_gpt.ckpt.safetensors";

const tok = CharTokenizer.fromText(TINY_CORPUS);
const tokens = tok.encode(TINY_CORPUS);
const asBatch = (b: TokenBatch) => ({ inputs: b.ids, shape: b.shape, targets: b.targets });
const validation = asBatch(sampleBatch(tokens, 16, 32, new Rng(0)));

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
    yield asBatch(sampleBatch(tokens, 16, 32, rng)); // drawn as the steps need them
  }
}

await model.train(batches(), {
  onStep: async (s) => {
    console.log(
      `step ${s.step + 1}  loss ${s.loss.toFixed(3)}  lr ${s.lr.toExponential(2)}  ` +
        `bubble ${(100 * s.bubble).toFixed(0)}%  ${s.makespanMs.toFixed(0)} ms`,
    );
    if ((s.step + 1) % EVAL_EVERY === 0) {
      const v = await model.evaluate(validation); // forward only: nothing changes
      console.log(
        `  validation: loss ${v.loss.toFixed(3)}, accuracy ${(100 * v.accuracy!).toFixed(1)}%`,
      );
    }
  },
});
await model.saveCheckpoint(CHECKPOINT, { data: { rng: JSON.stringify(rng.state()) } });
console.log(`checkpoint at step ${model.stepCount}: ${CHECKPOINT}`);
