/**
 * `train()` as a user calls it, on real compute (the tiny GPT, dim 64, 4
 * blocks, an 8 × 32 batch in 4 micro-batches, ZB-H1 at P = 2 in workers,
 * CPU), two tables:
 *
 * 1. The steady-state bubble of identical `train(8 batches)` calls: the
 *    median period over the call (what `TrainResult.steadyStateBubble`
 *    reports) against the last period alone (what it reported before).
 * 2. Batches from an iterable in windows of 1, 2, 4, 8 and 16 steps (one
 *    rank-group run each): ms per step and bubble over the call, the price of
 *    a window boundary (one pipeline fill and drain).
 * 3. What exact hook steps cost (`--exact`): the same 16 steps in the default
 *    window of 4 with hooks that only read results (a callback without
 *    `every`), a callback with `every: 8`, and `onStep` (every step exact,
 *    so every step is its own window); wall-clock ms per step over the call,
 *    the median of `--calls` calls each, interleaved.
 *
 * ```sh
 * deno run -A bench/train_loop.ts            # both tables
 * deno run -A bench/train_loop.ts --calls 8  # more calls in table 1
 * deno run -A bench/train_loop.ts --exact    # table 3 only
 * ```
 *
 * Timing on a shared machine is noisy: read the spread, not one figure.
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";
import { createRealPipeline, REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const values = benchArgs("bench/train_loop.ts", {
  calls: { type: "string", default: "5" },
  schedule: { type: "string", default: "zb-h1" },
  exact: { type: "boolean", default: false },
});
const calls = intFlag("bench/train_loop.ts", "calls", values.calls);
const schedule = String(values.schedule);
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

const CFG = { ...REAL_COMPUTE, dim: 64, layers: 4, seqLen: 32, batch: 8, microBatches: 4 };
await using model = await createRealPipeline(CFG, schedule, 2);
await model.train(realBatches(CFG, 3, 99)); // warm-up: JIT, caches

if (values.exact) {
  console.log(
    `## what exact hook steps cost: 16 steps from an iterable, window 4 (${schedule}, P = 2)\n`,
  );
  console.log("| hooks | windows | wall ms / step (median of calls) | range |");
  console.log("| ----- | ------: | -------------------------------: | ----: |");
  const kinds: [string, number, (rows: number[]) => object][] = [
    ["a callback reading results", 4, () => ({ callbacks: [{ onStepEnd: () => {} }] })],
    ["a callback with every: 8", 4, () => ({ callbacks: [{ every: 8, onStepEnd: () => {} }] })],
    ["onStep (every step exact)", 16, () => ({ onStep: () => {} })],
  ];
  const ms: number[][] = kinds.map(() => []);
  for (let c = 0; c < calls; c++) {
    for (const [k, [, , options]] of kinds.entries()) {
      const batches = realBatches(CFG, 16, 2);
      const t0 = performance.now();
      await model.train(batches.values(), options([]));
      ms[k].push((performance.now() - t0) / 16);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  for (const [k, [label, windows]] of kinds.entries()) {
    console.log(
      `| ${label} | ${windows} | ${median(ms[k]).toFixed(1)} | ${Math.min(...ms[k]).toFixed(1)} – ${
        Math.max(...ms[k]).toFixed(1)
      } |`,
    );
  }
  await model.dispose();
  Deno.exit(0);
}

console.log(`## steady-state bubble of identical train(8 batches) calls (${schedule}, P = 2)\n`);
console.log("| call | median period (steadyStateBubble) | last period alone |");
console.log("| ---: | --------------------------------: | ----------------: |");
const medians: number[] = [], lasts: number[] = [];
for (let c = 0; c < calls; c++) {
  const r = await model.train(realBatches(CFG, 8, 1));
  const last = summarizeTimeline(r.events, 2).steadyStateBubble!;
  medians.push(r.steadyStateBubble!);
  lasts.push(last);
  console.log(`| ${c + 1} | ${pct(r.steadyStateBubble!)} | ${pct(last)} |`);
}
const spread = (xs: number[]) => `${pct(Math.min(...xs))} – ${pct(Math.max(...xs))}`;
console.log(`| range | ${spread(medians)} | ${spread(lasts)} |\n`);

console.log(`## train(16 batches from an iterable) by window (${schedule}, P = 2)\n`);
console.log("| window | runs | ms / step | bubble over the call | steady-state bubble |");
console.log("| -----: | ---: | --------: | -------------------: | ------------------: |");
for (const window of [1, 2, 4, 8, 16]) {
  const batches = realBatches(CFG, 16, 2);
  const r = await model.train(batches.values(), { window });
  console.log(
    `| ${window} | ${16 / window} | ${(r.makespanMs / 16).toFixed(1)} | ${pct(r.bubble)} | ${
      pct(r.steadyStateBubble!)
    } |`,
  );
}
