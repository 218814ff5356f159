/**
 * Which schedule is fastest? `deno bench` times real pipelined training
 * steps, one bench per schedule, grouped per configuration with gpipe as
 * the baseline, so Deno's summary reads "zb-v … x faster than gpipe":
 *
 * - real compute: the tiny GPT (dim 128, 6 blocks, a 16 × 64 batch, m = 8)
 *   on the CPU backend, P = 2 ranks in workers; each timed call trains
 *   `STEPS_PER_CALL` steps back to back (one `train` call, as a training
 *   loop does);
 * - fixed-time actions: P = 4, m = 8, F = I = W = 20 ms (B = 40 ms) per
 *   full stage, in workers whose actions block their thread,
 *   `STEPS_PER_CALL` iterations per call. A schedule with V chunks per rank
 *   cuts each stage's work into V chunks of 20/V ms, so every schedule does
 *   the same work.
 *
 * Each pipeline is started before its first timed call and kept between
 * calls (`b.start()` / `b.end()` time the steps alone). At the end of the
 * run the bubble table is printed once: per schedule, the steady-state
 * bubble measured in the timed calls beside the simulated one (for real
 * compute, simulated with the per-action costs measured in those calls).
 *
 * ```sh
 * deno bench -A bench/pipeline_steps_bench.ts
 * ```
 *
 * For speedups against one rank, see `deno run -A bench/pipeline_speedup.ts`.
 *
 * @module
 */

import { generateSchedule, SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import type { Schedule, TimedEvent } from "../src/pipeline/schedule/schedule.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";
import { WorkerRankGroup } from "../src/pipeline/runtime/worker_rank_group.ts";
import {
  SYNTHETIC_EXECUTOR_URL,
  syntheticCosts,
} from "../src/pipeline/testing/synthetic_executor.ts";
import type { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import { createRealPipeline, measuredCosts, REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const STEPS_PER_CALL = 2;
const FIXED = { ranks: 4, microBatches: 8, ms: 20 } as const;
const REAL_RANKS = 2;
const REAL_GROUP =
  `real compute: tiny GPT, CPU, P=${REAL_RANKS}, m=${REAL_COMPUTE.microBatches}, ` +
  `${STEPS_PER_CALL} steps per call`;
const FIXED_GROUP = `fixed-time actions: P=${FIXED.ranks}, m=${FIXED.microBatches}, ` +
  `${FIXED.ms} ms, ${STEPS_PER_CALL} steps per call`;

// The one pipeline alive at a time: a bench's first call disposes the
// previous bench's, outside the timed region.
let live: { key: string; dispose(): Promise<void> } | null = null;
async function switchTo(key: string): Promise<void> {
  if (live !== null && live.key !== key) {
    const old = live;
    live = null;
    await old.dispose();
  }
}

// Timed calls' events per (group, schedule), for the table at the end.
const seen = new Map<string, { schedule: Schedule; events: TimedEvent[][] }>();
function record(group: string, schedule: Schedule, events: readonly TimedEvent[]): void {
  const key = `${group}\u0000${schedule.name}`;
  const entry = seen.get(key) ?? { schedule, events: [] };
  entry.events.push([...events]);
  seen.set(key, entry);
}

let realModel: PipelineParallelModel | null = null;
let pool: WorkerRankGroup | null = null;
let batchSeed = 1000;

for (const name of SCHEDULE_NAMES) {
  Deno.bench({
    name,
    group: REAL_GROUP,
    baseline: name === "gpipe",
    n: 2,
    warmup: 1,
    async fn(b) {
      const key = `real/${name}`;
      await switchTo(key);
      if (live === null) {
        const model = await createRealPipeline(REAL_COMPUTE, name, REAL_RANKS);
        realModel = model;
        live = {
          key,
          dispose: async () => {
            realModel = null;
            await model.dispose();
          },
        };
      }
      const batches = realBatches(REAL_COMPUTE, STEPS_PER_CALL, batchSeed++);
      b.start();
      const r = await realModel!.train(batches);
      b.end();
      record(REAL_GROUP, realModel!.schedule, r.events);
    },
  });
}

for (const name of SCHEDULE_NAMES) {
  const schedule = generateSchedule(name, FIXED);
  Deno.bench({
    name,
    group: FIXED_GROUP,
    baseline: name === "gpipe",
    n: 3,
    warmup: 1,
    async fn(b) {
      const key = `fixed/${name}`;
      await switchTo(key);
      if (live === null) {
        const p = await WorkerRankGroup.create({
          schedule,
          executor: {
            module: SYNTHETIC_EXECUTOR_URL,
            options: { ms: FIXED.ms / schedule.stagesPerRank, sleep: "block" },
          },
        });
        pool = p;
        live = {
          key,
          dispose: async () => {
            pool = null;
            await p.dispose();
          },
        };
      }
      b.start();
      const r = await pool!.run({ iterations: STEPS_PER_CALL });
      b.end();
      record(FIXED_GROUP, schedule, r.events);
    },
  });
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor((s.length - 1) / 2)];
}

/** The bubble table of the timed calls, one line per (group, schedule). */
function bubbleTable(): string {
  const lines = [
    "| group | schedule | bubble measured | bubble simulated |",
    "| :---- | :------- | --------------: | ---------------: |",
  ];
  for (const [key, { schedule, events }] of seen) {
    const group = key.split("\u0000")[0].split(":")[0];
    const p = schedule.ranks;
    const bubbles = events.map((ev) =>
      summarizeTimeline(ev, p, { steadyFrom: 1 }).steadyStateBubble!
    );
    const costs = group === "real compute"
      ? measuredCosts(events.flat(), schedule.stageToRank.length)
      : syntheticCosts(FIXED.ms / schedule.stagesPerRank);
    const sim = simulate(schedule, { costs, iterations: STEPS_PER_CALL });
    const simBubble = summarizeTimeline(sim.events, p, { steadyFrom: 1 }).steadyStateBubble!;
    lines.push(
      `| ${group} | ${schedule.name} | ${(100 * median(bubbles)).toFixed(1)}% | ${
        (100 * simBubble).toFixed(1)
      }% |`,
    );
  }
  return lines.join("\n");
}

// After the last bench: the table, once. (A pipeline still alive ends with the process.)
globalThis.addEventListener("unload", () => {
  if (seen.size === 0) return;
  console.log(
    `\nBubble per schedule (steady state over ${STEPS_PER_CALL} back-to-back steps per call, ` +
      `median over the timed calls):\n${bubbleTable()}\n`,
  );
});
