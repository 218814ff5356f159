/**
 * Memory per rank of every schedule on a named model, measured: the
 * benches' real-compute tiny GPT (`REAL_COMPUTE`: dim 128, 6 blocks split
 * in halves, 4 heads, a 16 × 64 batch in 8 micro-batches, CPU) at P ranks
 * (default 4), each schedule trained `--steps` steps in this thread; per
 * schedule the simulated bubble (F = I = W = 1 per full stage), the
 * simulated peak in-flight activations of the busiest rank in full stages'
 * worth, the runtime's reported peak activation bytes (the largest rank's,
 * the largest step's) and the AdamW state bytes per rank (the largest),
 * whole and with ZeRO-1 over D = 2 replicas (`shardOptimizer`, measured by
 * a (2, P) run's `rankInfo`). The table of `docs/memory.md`.
 *
 * ```sh
 * deno run -A bench/memory_table.ts [--ranks 4] [--steps 2] [--json]
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { generateSchedule, SCHEDULE_REGISTRY } from "../src/pipeline/schedule/generate.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../src/pipeline/model/pipeline_parallel_model.ts";
import { formatBytes } from "../src/advise/advice_table.ts";
import { REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const values = benchArgs("bench/memory_table.ts", {
  ranks: { type: "string", default: "4" },
  steps: { type: "string", default: "2" },
  json: { type: "boolean", default: false },
});
const P = Number(values.ranks);
const STEPS = Number(values.steps);
const CFG = REAL_COMPUTE;
const tok = CharTokenizer.fromText(TINY_CORPUS);

function net() {
  return createTinyGPT({
    vocabSize: tok.vocabSize,
    seqLen: CFG.seqLen,
    dim: CFG.dim,
    heads: CFG.heads,
    layers: CFG.layers,
    seed: CFG.seed,
    split: CFG.split,
  }, new CpuBackend());
}

async function run(o: Partial<PipelineParallelModelOptions>, batchRows: number) {
  const model = net();
  try {
    const m = await PipelineParallelModel.create({
      model,
      optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
      loss: "cross-entropy",
      backend: "cpu",
      rankGroup: "in-process",
      ...o,
    } as PipelineParallelModelOptions);
    model.dispose();
    try {
      const rows = realBatches({ ...CFG, batch: batchRows }, STEPS, 3);
      const r = await m.train(rows);
      const act = Math.max(...r.steps.flatMap((s) => s.peakActivationBytes));
      const opt = Math.max(...(await m.rankInfo()).map((i) => i.optimizerBytes));
      return { act, opt };
    } finally {
      await m.dispose();
    }
  } catch (e) {
    model.dispose();
    throw e;
  }
}

const rows = [];
for (const name of SCHEDULE_REGISTRY.names) {
  let schedule;
  try {
    schedule = generateSchedule(name, { ranks: P, microBatches: CFG.microBatches });
  } catch {
    continue;
  }
  const V = schedule.stagesPerRank;
  const costs = SCHEDULE_REGISTRY.definition(name).costAware ? 1 / V : 1;
  const sim = simulate(schedule, { costs: { F: costs, I: costs, W: costs } });
  const shape = { schedule, microBatches: undefined, ranks: undefined };
  const whole = await run(shape, CFG.batch);
  // ZeRO-1 over two replicas, each with the same per-replica batch.
  const sharded = await run({ ...shape, dataParallel: 2, shardOptimizer: true }, 2 * CFG.batch);
  rows.push({
    schedule: name,
    stagesPerRank: V,
    bubble: sim.bubbleFraction,
    peakStages: Math.max(...sim.peakActivations) / V,
    activationBytes: whole.act,
    shardedActivationBytes: sharded.act,
    optimizerBytes: whole.opt,
    shardedOptimizerBytes: sharded.opt,
  });
}

if (values.json) {
  for (const r of rows) console.log(JSON.stringify({ ranks: P, ...r }));
} else {
  console.log(
    `tiny GPT dim ${CFG.dim}, ${CFG.layers} blocks, batch ${CFG.batch} × ${CFG.seqLen}, ` +
      `P = ${P}, m = ${CFG.microBatches}, AdamW, CPU`,
  );
  console.log(
    "| schedule | V | bubble (simulated) | peak activations (full stages) | activation bytes per rank (measured) | AdamW state per rank | with ZeRO-1, D = 2 |",
  );
  console.log("| :-- | --: | --: | --: | --: | --: | --: |");
  for (const r of rows) {
    console.log(
      `| ${r.schedule} | ${r.stagesPerRank} | ${(100 * r.bubble).toFixed(1)}% | ${r.peakStages} | ${
        formatBytes(r.activationBytes)
      } | ${formatBytes(r.optimizerBytes)} | ${formatBytes(r.shardedOptimizerBytes)} |`,
    );
  }
}
