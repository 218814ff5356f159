/**
 * ZeRO-1 against the unsharded optimizer on real compute: the benches'
 * tiny GPT (`REAL_COMPUTE`, AdamW) at (D, P) = (2, 1) (default; `--ranks P`
 * for another P), ranks in workers, once with `shardOptimizer` and once
 * without. Both models are built and warmed up (`--warmup` steps), then
 * the rounds time one step of each in turn (so a load change on the
 * machine touches both alike). Prints per variant the median step over
 * the rounds, the spread (max − min), the ratio sharded / unsharded, and
 * the AdamW state bytes per rank (`rankInfo().optimizerBytes`).
 *
 * ```sh
 * deno run -A bench/optimizer_sharding.ts [--ranks 1] [--rounds 15] [--warmup 3]
 *   [--dim 128] [--seq-len 64] [--batch 16 (per replica)] [--json]
 * ```
 *
 * Measure on a quiet machine: the numbers of a loaded one say little.
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import { REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const values = benchArgs("bench/optimizer_sharding.ts", {
  ranks: { type: "string", default: "1" },
  rounds: { type: "string", default: "15" },
  warmup: { type: "string", default: "3" },
  dim: { type: "string", default: String(REAL_COMPUTE.dim) },
  "seq-len": { type: "string", default: String(REAL_COMPUTE.seqLen) },
  batch: { type: "string", default: String(REAL_COMPUTE.batch) },
  json: { type: "boolean", default: false },
});
const P = Number(values.ranks);
const ROUNDS = Number(values.rounds);
const WARMUP = Number(values.warmup);
const D = 2;
// `--batch` rows per replica; a wide model with a short batch makes the
// optimizer step and the exchange the larger part of the step.
const CFG = {
  ...REAL_COMPUTE,
  dim: Number(values.dim),
  seqLen: Number(values["seq-len"]),
  batch: D * Number(values.batch),
};
const tok = CharTokenizer.fromText(TINY_CORPUS);

async function build(shardOptimizer: boolean): Promise<PipelineParallelModel> {
  const net = createTinyGPT({
    vocabSize: tok.vocabSize,
    seqLen: CFG.seqLen,
    dim: CFG.dim,
    heads: CFG.heads,
    layers: CFG.layers,
    seed: CFG.seed,
    split: CFG.split,
  }, new CpuBackend());
  try {
    return await PipelineParallelModel.create({
      model: net,
      schedule: "1f1b",
      ranks: P,
      microBatches: CFG.microBatches,
      dataParallel: D,
      shardOptimizer,
      optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
      loss: "cross-entropy",
      backend: "cpu",
      rankGroup: "workers",
    });
  } finally {
    net.dispose();
  }
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const variants = [
  { name: "unsharded", model: await build(false), times: [] as number[] },
  { name: "ZeRO-1", model: await build(true), times: [] as number[] },
];
try {
  for (const v of variants) await v.model.train(realBatches(CFG, WARMUP, 100));
  const batches = realBatches(CFG, ROUNDS, 7);
  for (const b of batches) {
    for (const v of variants) {
      const t = performance.now();
      await v.model.step(b);
      v.times.push(performance.now() - t);
    }
  }
  const rows = [];
  for (const v of variants) {
    const info = await v.model.rankInfo();
    rows.push({
      variant: v.name,
      dataParallel: D,
      ranks: P,
      stepMs: median(v.times),
      spreadMs: Math.max(...v.times) - Math.min(...v.times),
      optimizerBytes: info.map((i) => i.optimizerBytes),
    });
  }
  const ratio = rows[1].stepMs / rows[0].stepMs;
  if (values.json) {
    for (const r of rows) console.log(JSON.stringify(r));
    console.log(JSON.stringify({ shardedOverUnsharded: ratio }));
  } else {
    console.log(
      `tiny GPT dim ${CFG.dim}, ${CFG.layers} blocks, batch ${CFG.batch} × ${CFG.seqLen}, ` +
        `(D, P) = (${D}, ${P}), 1f1b, AdamW, workers, ${ROUNDS} rounds`,
    );
    console.log("| variant | median step ms | spread ms | AdamW state per rank (bytes) |");
    console.log("| :-- | --: | --: | :-- |");
    for (const r of rows) {
      console.log(
        `| ${r.variant} | ${r.stepMs.toFixed(1)} | ${r.spreadMs.toFixed(1)} | ${
          r.optimizerBytes.join(", ")
        } |`,
      );
    }
    console.log(`ZeRO-1 / unsharded: ${ratio.toFixed(3)}`);
  }
} finally {
  for (const v of variants) await v.model.dispose();
}
