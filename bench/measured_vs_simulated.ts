/**
 * The worker runtime against the simulator: every schedule of
 * `generateSchedule` at P = 4, m = 8 with synthetic fixed-time actions
 * (sleeping workers, so the figures do not depend on the core count),
 * printing measured makespan / simulated makespan, the measured bubble
 * beside the simulated one, and over several back-to-back iterations the
 * measured steady-state bubble beside the simulated one (ZB-H2's and ZB-V's
 * reach zero only there), then a verdict line against stated bounds.
 *
 * ```sh
 * deno run -A bench/measured_vs_simulated.ts                 # ms = 25 per F, I, W (B = 50)
 * deno run -A bench/measured_vs_simulated.ts --ms 40 --iterations 6 --steady-from 2 --json
 * deno run -A bench/measured_vs_simulated.ts --schedule zb-h2 --schedule 1f1b
 * ```
 *
 * Each single-iteration figure is the median over `--repeats` runs (after
 * one warm-up iteration); the steady-state figures come from one run of
 * `--iterations` iterations (default 8), by `summarizeTimeline`'s
 * `steadyFrom`: the period is the median time between consecutive
 * iterations' ends from iteration `--steady-from` (default 2) on, for the
 * measured and the simulated events alike. One period alone (the last, as
 * `simulate` reports it) carries whatever the shared machine did during it.
 * The simulator gets the same per-kind costs and no communication delay, so
 * the ratio shows everything the runtime adds: message latency, timer
 * lateness, scheduling on a shared machine.
 *
 * Verdict (`VERDICT_BOUNDS`): ZB-H2's measured steady-state bubble at most
 * 2 % and every makespan ratio (one iteration and back to back) at most 1.10.
 *
 * @module
 */

import { benchArgs, intFlag, positiveFlag } from "./_args.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { WorkerRankGroup } from "../src/pipeline/runtime/worker_rank_group.ts";
import type { RankGroupRunResult } from "../src/pipeline/runtime/rank_group.ts";
import {
  SYNTHETIC_EXECUTOR_URL,
  syntheticCosts,
} from "../src/pipeline/testing/synthetic_executor.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";

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
  /** First iteration whose period counts in the steady-state figures (median period). */
  steadyFrom: number;
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
  steadyFrom: number = iterations - 1,
  nonFinite: "off" | "skip" = "off",
): Promise<RuntimeRow> {
  const schedule = generateSchedule(name, { ranks: p, microBatches: m });
  const costs = syntheticCosts(ms);
  const pool = await WorkerRankGroup.create({
    schedule,
    executor: { module: SYNTHETIC_EXECUTOR_URL, options: { ms, sleep: "block" } },
    policy: { nonFinite },
  });
  try {
    await pool.run(); // warm-up: JIT, first messages on each port
    const singles: RankGroupRunResult[] = [];
    for (let i = 0; i < repeats; i++) singles.push(await pool.run());
    const single = singles.find((r) => r.makespan === median(singles.map((s) => s.makespan)))!;
    const steady = await pool.run({ iterations });
    const sim1 = simulate(schedule, { costs });
    const simK = simulate(schedule, { costs, iterations });
    const measuredSteady = summarizeTimeline(steady.events, p, { steadyFrom });
    const simulatedSteady = summarizeTimeline(simK.events, p, { steadyFrom });
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
      steadyFrom,
      steadyRatio: steady.makespan / simK.makespan,
      measuredSteadyBubble: measuredSteady.steadyStateBubble ?? NaN,
      simulatedSteadyBubble: simulatedSteady.steadyStateBubble ?? NaN,
    };
  } finally {
    await pool.dispose();
  }
}

/** Bounds of the verdict line: the issue's "near zero" and "at most 1.10". */
export const VERDICT_BOUNDS = { zbH2SteadyBubble: 0.02, makespanRatio: 1.10 } as const;

/**
 * One line: PASS when ZB-H2's measured steady-state bubble and every
 * makespan ratio are within {@linkcode VERDICT_BOUNDS}, else FAIL naming
 * what is over (a figure that is NaN, not measured, fails).
 */
export function verdict(rows: readonly RuntimeRow[]): string {
  const over: string[] = [];
  const zb = rows.find((r) => r.schedule === "zb-h2");
  if (zb !== undefined && !(zb.measuredSteadyBubble <= VERDICT_BOUNDS.zbH2SteadyBubble)) {
    over.push(`zb-h2 steady-state bubble ${(zb.measuredSteadyBubble * 100).toFixed(1)}%`);
  }
  let worst = 0;
  let worstAt = "";
  for (const r of rows) {
    for (
      const [ratio, what] of [[r.ratio, "1 it"], [r.steadyRatio, `${r.iterations} it`]] as const
    ) {
      if (ratio > worst) [worst, worstAt] = [ratio, `${r.schedule}, ${what}`];
      if (!(ratio <= VERDICT_BOUNDS.makespanRatio)) {
        over.push(`${r.schedule} makespan ratio ${ratio.toFixed(3)} (${what})`);
      }
    }
  }
  const zbText = zb === undefined
    ? "zb-h2 not run"
    : `zb-h2 steady-state bubble ${(zb.measuredSteadyBubble * 100).toFixed(1)}%`;
  return `verdict: ${over.length === 0 ? "PASS" : "FAIL"} (bounds: zb-h2 steady-state bubble <= ` +
    `${VERDICT_BOUNDS.zbH2SteadyBubble * 100}%, every makespan ratio <= ` +
    `${VERDICT_BOUNDS.makespanRatio.toFixed(2)}): ${zbText}, worst ratio ${worst.toFixed(3)} ` +
    `(${worstAt})${over.length === 0 ? "" : `; over: ${over.join(", ")}`}`;
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
  const values = benchArgs("bench/measured_vs_simulated.ts", {
    ms: { type: "string", default: "25" },
    ranks: { type: "string", default: "4" },
    microbatches: { type: "string", default: "8" },
    repeats: { type: "string", default: "3" },
    iterations: { type: "string", default: "8" },
    "steady-from": { type: "string", default: "2" },
    schedule: { type: "string", multiple: true },
    json: { type: "boolean" },
    // Post-validation of every step (the non-finite check), as a model with nonFinite runs.
    "validate-steps": { type: "boolean" },
  });
  const ms = positiveFlag("bench/measured_vs_simulated.ts", "ms", values.ms);
  const p = intFlag("bench/measured_vs_simulated.ts", "ranks", values.ranks);
  const m = intFlag("bench/measured_vs_simulated.ts", "microbatches", values.microbatches);
  const repeats = intFlag("bench/measured_vs_simulated.ts", "repeats", values.repeats);
  const iterations = intFlag("bench/measured_vs_simulated.ts", "iterations", values.iterations);
  const steadyFrom = Number(values["steady-from"]);
  if (!(ms > 0)) throw new RangeError(`--ms must be a positive number, got ${values.ms}`);
  if (!Number.isInteger(repeats) || repeats < 1) {
    throw new RangeError(`--repeats must be a positive integer, got ${values.repeats}`);
  }
  if (!Number.isInteger(iterations) || iterations < 2) {
    throw new RangeError(`--iterations must be an integer >= 2, got ${values.iterations}`);
  }
  if (!Number.isInteger(steadyFrom) || steadyFrom < 1 || steadyFrom > iterations - 1) {
    throw new RangeError(
      `--steady-from must be an integer from 1 to iterations - 1 = ${iterations - 1}, ` +
        `got ${values["steady-from"]}`,
    );
  }
  const names = values.schedule ?? [...SCHEDULE_NAMES];
  if (!values.json) {
    console.log(
      `P=${p} m=${m}, synthetic F=I=W=${ms} ms (B=${2 * ms} ms), sleeping workers; ` +
        `single iteration: median of ${repeats}; steady state: one run of ${iterations} ` +
        `iterations, median period from iteration ${steadyFrom} on; step validation ${
          values["validate-steps"] ? "on (every stage's check published, verdicts awaited)" : "off"
        }`,
    );
  }
  const rows: RuntimeRow[] = [];
  for (const name of names) {
    const row = await measureSchedule(
      name,
      p,
      m,
      ms,
      repeats,
      iterations,
      steadyFrom,
      values["validate-steps"] ? "skip" : "off",
    );
    rows.push(row);
    if (values.json) console.log(JSON.stringify(row));
  }
  if (!values.json) {
    console.log(table(rows));
    const worst = rows.reduce((a, b) => (b.ratio > a.ratio ? b : a));
    console.log(`worst single-iteration ratio: ${worst.ratio.toFixed(3)} (${worst.schedule})`);
  }
  console.log(values.json ? JSON.stringify({ verdict: verdict(rows) }) : verdict(rows));
}
