/**
 * What each home for the ranks costs, on real compute: the tiny GPT (dim
 * 64, 4 blocks, an 8 × 32 batch in 4 micro-batches, ZB-H1 at P = 2, CPU)
 * with its ranks in this thread, in workers, and in a child process
 * (`rankGroup: "subprocess"`, which can always be ended, even when user
 * code holds a rank's thread). Per group: the time to create the model
 * (start the ranks and load the weights), the median step, and the time
 * `dispose()` takes.
 *
 * ```sh
 * deno run -A bench/rank_groups.ts [--steps 10] [--json]
 * ```
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { createRealPipeline, REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const values = benchArgs("bench/rank_groups.ts", {
  steps: { type: "string", default: "10" },
  json: { type: "boolean", default: false },
});
const steps = intFlag("bench/rank_groups.ts", "steps", values.steps);
if (!Number.isInteger(steps) || steps < 1) {
  throw new RangeError(`--steps must be a positive integer, got ${values.steps}`);
}
const CFG = { ...REAL_COMPUTE, dim: 64, layers: 4, seqLen: 32, batch: 8, microBatches: 4 };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const rows: { rankGroup: string; createMs: number; stepMs: number; disposeMs: number }[] = [];
for (const rankGroup of ["in-process", "workers", "subprocess"] as const) {
  const t0 = performance.now();
  const model = await createRealPipeline(CFG, "zb-h1", 2, rankGroup);
  const createMs = performance.now() - t0;
  await model.train(realBatches(CFG, 2, 99)); // warm-up: JIT, caches
  const times: number[] = [];
  for (const batch of realBatches(CFG, steps, 7)) {
    const s = performance.now();
    await model.step(batch);
    times.push(performance.now() - s);
  }
  const d = performance.now();
  await model.dispose();
  const row = { rankGroup, createMs, stepMs: median(times), disposeMs: performance.now() - d };
  rows.push(row);
  if (values.json) console.log(JSON.stringify(row));
}

if (!values.json) {
  console.log(`tiny GPT dim ${CFG.dim}, ${CFG.layers} blocks, zb-h1, P = 2, m = 4, CPU\n`);
  console.log("| rankGroup  | create ms | step ms (median) | dispose ms |");
  console.log("| :--------- | --------: | ---------------: | ---------: |");
  for (const r of rows) {
    console.log(
      `| ${r.rankGroup.padEnd(10)} | ${r.createMs.toFixed(0).padStart(9)} | ${
        r.stepMs.toFixed(1).padStart(16)
      } | ${r.disposeMs.toFixed(1).padStart(10)} |`,
    );
  }
}
