/**
 * The quick `deno bench` (about a minute on 2 cores): which schedule is
 * fastest for a small real model, with enough samples to compare, beside
 * what the advisor predicted.
 *
 * - "schedules, real compute": a small tiny GPT (dim 64, 3 blocks as 6
 *   residual halves, an 8 × 32 batch, m = 8) on the CPU backend, P = 2
 *   ranks in workers, one bench per schedule (gpipe the baseline), each
 *   timed call training 3 steps back to back; 2 warm-up and 12 timed
 *   calls per schedule, so Deno's min … max column is the spread;
 * - "advisor arithmetic": planning and simulating every schedule from
 *   measured per-layer costs (what `adviseSchedule` does per candidate).
 *
 * Nothing is printed while the benches run; once they end, one table sets
 * the advisor's predicted ms per step (profiled before the first bench)
 * beside the median steady-state period of the timed calls.
 *
 * ```sh
 * deno bench -A bench/quick_bench.ts
 * ```
 *
 * @module
 */

import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { sampleBatch } from "../src/nn/sample_batch.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { Rng } from "../src/tensor/random.ts";
import { SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { FixedPartition } from "../src/pipeline/partition/partition.ts";
import { adviseSchedule } from "../src/advise/advise.ts";
import { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import type { TrainingBatch } from "../src/pipeline/model/batch.ts";
import { planCandidate, predictStep } from "../src/advise/step_prediction.ts";
import type { AdviceCandidate } from "../src/advise/advice_table.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";

const STEPS_PER_CALL = 3;
const WARMUP = 2;
const RANKS = 2;
const M = 8;
const GROUP = `schedules, real compute: small GPT, CPU, P=${RANKS}, m=${M}, ` +
  `${STEPS_PER_CALL} steps per call`;

const tok = CharTokenizer.fromText(TINY_CORPUS);
const tokens = tok.encode(TINY_CORPUS);
const net = createTinyGPT(
  { vocabSize: tok.vocabSize, seqLen: 32, dim: 64, heads: 4, layers: 3, seed: 1, split: "halves" },
  new CpuBackend(),
);
const rng = new Rng(2);
const batch = (): TrainingBatch => {
  const b = sampleBatch(tokens, 8, 32, rng);
  return { inputs: b.ids, shape: b.shape, targets: b.targets };
};

// The advisor's prediction for every schedule, before the benches start.
const advice = await adviseSchedule(net, batch(), {
  loss: "cross-entropy",
  ranks: RANKS,
  microBatches: M,
  repeats: 3,
});
const byName = new Map<string, AdviceCandidate>(advice.candidates.map((c) => [c.schedule, c]));
const measured = new Map<string, number[]>();

let live: { name: string; model: PipelineParallelModel } | null = null;
for (const name of SCHEDULE_NAMES) {
  const c = byName.get(name);
  Deno.bench({
    name,
    group: GROUP,
    baseline: name === "gpipe",
    n: 12,
    warmup: WARMUP,
    ignore: c === undefined,
    async fn(b) {
      if (live?.name !== name) {
        await live?.model.dispose();
        live = {
          name,
          model: await PipelineParallelModel.create({
            model: net,
            schedule: c!.generated!,
            partition: new FixedPartition(c!.boundaries),
            optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
            loss: "cross-entropy",
            backend: "cpu",
          }),
        };
      }
      const batches = Array.from({ length: STEPS_PER_CALL }, batch);
      b.start();
      const r = await live.model.train(batches);
      b.end();
      // The steady-state period (what the advisor predicts), after the warm-up calls.
      const list = measured.get(name) ?? [];
      list.push(summarizeTimeline(r.events, RANKS, { steadyFrom: 1 }).period ?? NaN);
      measured.set(name, list);
    },
  });
}

// The alone profile, and the one with every rank computing (the contention model's).
const [alone, together] = advice.profiles;
Deno.bench({ name: "plan and simulate every schedule", group: "advisor arithmetic" }, () => {
  for (const name of SCHEDULE_NAMES) {
    const plan = planCandidate(
      name,
      RANKS,
      M,
      alone.profile.layers,
      alone.overheads,
      alone.profile.loss?.median ?? 0,
      { layers: together.profile.layers, lossMs: together.profile.loss?.median ?? 0 },
    );
    predictStep(plan.schedule, plan.costs, alone.overheads, { together: plan.together });
  }
});

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

// Once every bench is done: the advisor beside the measurements (and the pipeline goes).
globalThis.addEventListener("unload", () => {
  if (measured.size === 0) return;
  const lines = [
    "| schedule | predicted ms per step | measured ms per step | measured / predicted |",
    "| :------- | --------------------: | -------------------: | -------------------: |",
  ];
  for (const c of advice.candidates) {
    const ms = measured.get(c.schedule);
    if (ms === undefined) continue;
    const m = median(ms.slice(WARMUP));
    lines.push(
      `| ${c.schedule} | ${c.predictedMs.toFixed(1)} | ${m.toFixed(1)} | ${
        (m / c.predictedMs).toFixed(2)
      } |`,
    );
  }
  console.log(
    `\nThe advisor's ranking (predicted in ${(advice.predictionMs / 1000).toFixed(1)} s) beside ` +
      `the median steady-state period of the timed calls (from their second step on):\n${
        lines.join("\n")
      }\n`,
  );
});
