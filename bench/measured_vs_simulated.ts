/**
 * The worker runtime against the simulator: every schedule of
 * `generateSchedule` at P = 4, m = 8 with synthetic fixed-time actions
 * (sleeping workers, so the figures do not depend on the core count),
 * printing measured makespan / simulated makespan, the measured bubble
 * beside the simulated one, and over several back-to-back iterations the
 * measured steady-state bubble beside the simulated one (ZB-H2's and ZB-V's
 * reach zero only there).
 *
 * ```sh
 * deno run -A bench/measured_vs_simulated.ts                 # ms = 25 per F, I, W (B = 50)
 * deno run -A bench/measured_vs_simulated.ts --ms 40 --iterations 4 --json
 * deno run -A bench/measured_vs_simulated.ts --schedule zb-h2 --schedule 1f1b
 * ```
 *
 * Each single-iteration figure is the median over `--repeats` runs (after
 * one warm-up iteration); the steady-state figures come from one run of
 * `--iterations` iterations. The simulator gets the same per-kind costs and
 * no communication delay, so the ratio shows everything the runtime adds:
 * message latency, timer lateness, scheduling on a shared machine.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { generateSchedule, SCHEDULE_NAMES } from "../src/pipeline/generate.ts";
import { simulate } from "../src/pipeline/simulate.ts";
import { type PipelineRunResult, PipelineWorkerPool } from "../src/pipeline/runtime/worker_pool.ts";
import { syntheticCosts } from "../src/pipeline/runtime/synthetic_executor.ts";

/** One row of the table. */
export interface RuntimeRow {
  schedule: string;
  p: number;
  m: number;
  v: number;
  ms: number;
  measuredMakespanMs: number;
  simulatedMakespanMs: number;
  ratio: number;
  measuredBubble: number;
  simulatedBubble: number;
  iterations: number;
  steadyRatio: number;
  measuredSteadyBubble: number;
  simulatedSteadyBubble: number;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Measures one schedule; the pool is disposed before it returns. */
export async function measureSchedule(
  name: string,
  p: number,
  m: number,
  ms: number,
  repeats: number,
  iterations: number,
): Promise<RuntimeRow> {
  const schedule = generateSchedule(name, { ranks: p, microBatches: m });
  const costs = syntheticCosts(ms);
  const pool = await PipelineWorkerPool.create({
    schedule,
    executor: { options: { ms, sleep: "block" } },
  });
  try {
    await pool.run(); // warm-up: JIT, first messages on each port
    const singles: PipelineRunResult[] = [];
    for (let i = 0; i < repeats; i++) singles.push(await pool.run());
    const single = singles.find((r) => r.makespan === median(singles.map((s) => s.makespan)))!;
    const steady = await pool.run({ iterations });
    const sim1 = simulate(schedule, { costs });
    const simK = simulate(schedule, { costs, iterations });
    return {
      schedule: name,
      p,
      m,
      v: schedule.stagesPerRank,
      ms,
      measuredMakespanMs: single.makespan,
      simulatedMakespanMs: sim1.makespan,
      ratio: single.makespan / sim1.makespan,
      measuredBubble: single.bubbleFraction,
      simulatedBubble: sim1.bubbleFraction,
      iterations,
      steadyRatio: steady.makespan / simK.makespan,
      measuredSteadyBubble: steady.steadyStateBubble ?? NaN,
      simulatedSteadyBubble: simK.steadyStateBubble ?? NaN,
    };
  } finally {
    await pool.dispose();
  }
}

function table(rows: RuntimeRow[]): string {
  const head = [
    "schedule".padEnd(17),
    "V",
    "measured ms".padStart(11),
    "simulated".padStart(10),
    "ratio".padStart(6),
    "bubble meas/sim".padStart(16),
    `ratio x${rows[0]?.iterations ?? ""}`.padStart(9),
    "steady bubble meas/sim".padStart(23),
  ];
  const lines = [head.join("  ")];
  for (const r of rows) {
    lines.push([
      r.schedule.padEnd(17),
      String(r.v),
      r.measuredMakespanMs.toFixed(1).padStart(11),
      r.simulatedMakespanMs.toFixed(0).padStart(10),
      r.ratio.toFixed(3).padStart(6),
      `${r.measuredBubble.toFixed(3)} / ${r.simulatedBubble.toFixed(3)}`.padStart(16),
      r.steadyRatio.toFixed(3).padStart(9),
      `${r.measuredSteadyBubble.toFixed(3)} / ${r.simulatedSteadyBubble.toFixed(3)}`.padStart(23),
    ].join("  "));
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      ms: { type: "string", default: "25" },
      ranks: { type: "string", default: "4" },
      microbatches: { type: "string", default: "8" },
      repeats: { type: "string", default: "3" },
      iterations: { type: "string", default: "3" },
      schedule: { type: "string", multiple: true },
      json: { type: "boolean" },
    },
  });
  const ms = Number(values.ms);
  const p = Number(values.ranks);
  const m = Number(values.microbatches);
  const repeats = Number(values.repeats);
  const iterations = Number(values.iterations);
  if (!(ms > 0)) throw new RangeError(`--ms must be a positive number, got ${values.ms}`);
  if (!Number.isInteger(repeats) || repeats < 1) {
    throw new RangeError(`--repeats must be a positive integer, got ${values.repeats}`);
  }
  if (!Number.isInteger(iterations) || iterations < 2) {
    throw new RangeError(`--iterations must be an integer >= 2, got ${values.iterations}`);
  }
  const names = values.schedule ?? [...SCHEDULE_NAMES];
  if (!values.json) {
    console.log(
      `P=${p} m=${m}, synthetic F=I=W=${ms} ms (B=${2 * ms} ms), sleeping workers; ` +
        `single iteration: median of ${repeats}; steady state over ${iterations} iterations`,
    );
  }
  const rows: RuntimeRow[] = [];
  for (const name of names) {
    const row = await measureSchedule(name, p, m, ms, repeats, iterations);
    rows.push(row);
    if (values.json) console.log(JSON.stringify(row));
  }
  if (!values.json) {
    console.log(table(rows));
    const worst = rows.reduce((a, b) => (b.ratio > a.ratio ? b : a));
    console.log(`worst single-iteration ratio: ${worst.ratio.toFixed(3)} (${worst.schedule})`);
  }
}
