// One copy of the tiny GPT training on the CPU backend in a worker, for
// bench/cpu_pool.ts: builds the model on `new CpuBackend({ poolBytes })`,
// trains `warmup` steps, says "ready", waits for "go", trains `steps` timed
// steps (each: `microBatches` forward/backward passes accumulating
// gradients, then one AdamW step) and posts their times.

import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { sampleBatch } from "../src/nn/sample_batch.ts";
import { crossEntropyLoss } from "../src/nn/losses.ts";
import { AdamW } from "../src/nn/adamw.ts";
import { Rng } from "../src/tensor/random.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";

/** What the bench sends. */
export interface PoolWorkerJob {
  readonly poolBytes: number;
  readonly dim: number;
  readonly layers: number;
  readonly rows: number;
  readonly seqLen: number;
  readonly microBatches: number;
  readonly warmup: number;
  readonly steps: number;
  readonly seed: number;
}

const self = globalThis as unknown as {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(m: unknown): void;
};

self.onmessage = (e: MessageEvent<PoolWorkerJob>) => {
  const job = e.data;
  const be = new CpuBackend({ poolBytes: job.poolBytes });
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  const data = tok.encode(TINY_CORPUS);
  const model = createTinyGPT({
    vocabSize: tok.vocabSize,
    seqLen: job.seqLen,
    dim: job.dim,
    heads: 4,
    layers: job.layers,
    seed: 1,
  }, be);
  const opt = new AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0 });
  const rng = new Rng(job.seed);
  const rowsPer = job.rows / job.microBatches;
  const step = () => {
    model.zeroGrad();
    for (let m = 0; m < job.microBatches; m++) {
      const b = sampleBatch(data, rowsPer, job.seqLen, rng);
      const x = be.fromData(b.ids, b.shape), t = be.fromData(b.targets, b.shape);
      const y = model.forward(x);
      const { loss, grad } = crossEntropyLoss(y, t);
      model.backward(grad).dispose();
      for (const z of [x, t, y, loss, grad]) z.dispose();
    }
    opt.step();
  };
  for (let i = 0; i < job.warmup; i++) step();
  self.onmessage = () => {
    const times: number[] = [];
    for (let i = 0; i < job.steps; i++) {
      const t0 = performance.now();
      step();
      times.push(performance.now() - t0);
    }
    opt.dispose();
    model.dispose();
    self.postMessage({ times, pool: be.pool });
  };
  self.postMessage("ready");
};
