/**
 * What the runtime costs per action, apart from the work: each rank's loop
 * (look up the action, start its receives, run it, post its outputs, and
 * turn the event loop once so that those posts leave before the next action
 * starts) around actions that do nothing (the synthetic executor at 0 ms).
 * ZB-H1 at P = 2, m = 8, 50 iterations per run, 7 runs; per action = the
 * run's wall time over its actions (in one thread every rank's actions are
 * serial; in workers, over the actions of one rank, hand-overs included).
 *
 * ```sh
 * deno run -A bench/action_overhead.ts [--json]
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { generateSchedule } from "../src/pipeline/schedule/generate.ts";
import { InProcessRankGroup } from "../src/pipeline/runtime/in_process_rank_group.ts";
import { WorkerRankGroup } from "../src/pipeline/runtime/worker_rank_group.ts";
import type { RankGroup } from "../src/pipeline/runtime/rank_group.ts";
import {
  createSyntheticExecutor,
  SYNTHETIC_EXECUTOR_URL,
} from "../src/pipeline/testing/synthetic_executor.ts";

const values = benchArgs("bench/action_overhead.ts", { json: { type: "boolean" } });
const schedule = generateSchedule("zb-h1", { ranks: 2, microBatches: 8 });
const ITERATIONS = 50, RUNS = 7;
const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

async function perAction(group: RankGroup, serial: boolean): Promise<number[]> {
  await group.run({ iterations: 5 }); // warm-up
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const r = await group.run({ iterations: ITERATIONS });
    const wall = performance.now() - t0;
    out.push(wall / (serial ? r.events.length : r.events.length / schedule.ranks));
  }
  await group.dispose();
  return out;
}

const rows = [
  {
    group: "in-process",
    ms: await perAction(
      await InProcessRankGroup.create({
        schedule,
        createExecutor: createSyntheticExecutor,
        executorOptions: { ms: 0 },
      }),
      true,
    ),
  },
  {
    group: "workers",
    ms: await perAction(
      await WorkerRankGroup.create({
        schedule,
        executor: { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 0 } },
      }),
      false,
    ),
  },
];

for (const { group, ms } of rows) {
  const row = { group, medianMs: quantile(ms, 0.5), maxMs: quantile(ms, 1) };
  if (values.json) console.log(JSON.stringify(row));
  else {
    console.log(
      `${group.padEnd(10)} per action: median ${(1000 * row.medianMs).toFixed(1)} µs, ` +
        `worst run ${(1000 * row.maxMs).toFixed(1)} µs (goal < 100 µs)`,
    );
  }
}
