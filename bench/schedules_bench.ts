/**
 * Every schedule side by side at one (p, m), default p = 4, m = 8: simulated
 * bubble (one iteration and steady state), the reference sheet's formula,
 * peak activations on rank 0, and the same schedule measured on workers with
 * synthetic fixed-time actions (sleeping, so the figures do not depend on
 * the core count), printed as one Markdown table.
 *
 * ```sh
 * deno run -A bench/schedules_bench.ts            # the table
 * deno bench -A bench/schedules_bench.ts          # the simulator's own speed (no table)
 * deno run -A bench/schedules_bench.ts --json     # one JSON object per schedule
 * deno run -A bench/schedules_bench.ts --ranks 4 --microbatches 8 --ms 20 --iterations 8 --steady-from 2
 * deno run -A bench/schedules_bench.ts --svg docs/img --simulated-only   # timelines, no workers
 * ```
 *
 * Options also come from the environment: `SCHEDULES_BENCH_RANKS`,
 * `SCHEDULES_BENCH_MICROBATCHES`, `SCHEDULES_BENCH_MS`, `SCHEDULES_BENCH_REPEATS`,
 * `SCHEDULES_BENCH_ITERATIONS`, `SCHEDULES_BENCH_STEADY_FROM`, and
 * `SCHEDULES_BENCH_MEASURE=0` to skip the workers. Under `deno bench` this
 * file only times the simulator ("simulator speed" groups); the schedules'
 * speed on real compute is `bench/pipeline_speedup.ts` and `bench/quick_bench.ts`.
 *
 * The measured steady state is the median period from iteration
 * `--steady-from` (default 2) of one run of `--iterations` (default 8), as
 * `bench/measured_vs_simulated.ts` takes it; the simulated periods are all
 * equal by then, so its figure is `simulate`'s.
 *
 * @module
 */

import { benchArgs, positiveFlag } from "./_args.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { renderSvg } from "../src/pipeline/render/render_svg.ts";
import { measureSchedule, type RuntimeRow, verdict } from "./measured_vs_simulated.ts";
import {
  formatScheduleTable,
  type ScheduleTableRow,
  simulatedTableRows,
  withMeasurement,
} from "./_schedule_table.ts";

const BENCH_P = 4;
const BENCH_M = 8;

function env(name: string): string | undefined {
  try {
    return Deno.env.get(`SCHEDULES_BENCH_${name}`);
  } catch {
    return undefined; // no env permission: defaults
  }
}

function integer(flag: string, text: string, min: number): number {
  const v = Number(text);
  if (!Number.isInteger(v) || v < min) {
    throw new RangeError(`--${flag} must be an integer >= ${min}, got "${text}"`);
  }
  return v;
}

const values = benchArgs("bench/schedules_bench.ts", {
  ranks: { type: "string", default: env("RANKS") ?? String(BENCH_P) },
  microbatches: { type: "string", default: env("MICROBATCHES") ?? String(BENCH_M) },
  ms: { type: "string", default: env("MS") ?? "20" },
  repeats: { type: "string", default: env("REPEATS") ?? "3" },
  iterations: { type: "string", default: env("ITERATIONS") ?? "8" },
  "steady-from": { type: "string", default: env("STEADY_FROM") ?? "2" },
  "simulated-only": { type: "boolean", default: env("MEASURE") === "0" },
  json: { type: "boolean", default: false },
  svg: { type: "string" },
});
const p = integer("ranks", values.ranks, 1);
const m = integer("microbatches", values.microbatches, 1);
const repeats = integer("repeats", values.repeats, 1);
const iterations = integer("iterations", values.iterations, 2);
const steadyFrom = integer("steady-from", values["steady-from"], 1);
if (steadyFrom > iterations - 1) {
  throw new RangeError(
    `--steady-from must be at most iterations - 1 = ${iterations - 1}, got ${steadyFrom}`,
  );
}
const ms = positiveFlag("bench/schedules_bench.ts", "ms", values.ms);
if (!(ms > 0) || !Number.isFinite(ms)) {
  throw new RangeError(`--ms must be a positive number of milliseconds, got "${values.ms}"`);
}

// The table: `deno run` only (under `deno bench`, import.meta.main is false).
if (import.meta.main) {
  let rows: ScheduleTableRow[] = simulatedTableRows(p, m, iterations);

  if (values.svg !== undefined) {
    await Deno.mkdir(values.svg, { recursive: true });
    for (const row of rows) {
      const schedule = generateSchedule(row.schedule, { ranks: p, microBatches: m });
      const sim = simulate(schedule);
      const path = `${values.svg}/${row.schedule}.svg`;
      await Deno.writeTextFile(
        path,
        renderSvg(sim.events, {
          title: `${row.schedule}: p=${p}, m=${m}, V=${row.v}, simulated (F = I = W = 1, B = 2)`,
          bubbleFraction: sim.bubbleFraction,
          ranks: p,
        }),
      );
      if (!values.json) console.error(`wrote ${path}`);
    }
  }

  const t0 = performance.now();
  const runs: RuntimeRow[] = [];
  if (!values["simulated-only"]) {
    const measured: ScheduleTableRow[] = [];
    for (const row of rows) {
      const run = await measureSchedule(row.schedule, p, m, ms, repeats, iterations, steadyFrom);
      runs.push(run);
      measured.push(withMeasurement(row, run));
    }
    rows = measured;
  }
  const seconds = (performance.now() - t0) / 1000;

  if (values.json) {
    for (const r of rows) console.log(JSON.stringify(r));
  } else {
    console.log(
      `\nSchedules at p=${p}, m=${m}. Simulated: F = I = W = 1, B = 2, no communication delay; ` +
        `steady state over ${iterations} back-to-back iterations.\n`,
    );
    console.log(formatScheduleTable(rows));
    console.log(
      "\nformula: estimateBubbleFraction (zb-h2, zb-v: the steady-state figure; — where none). " +
        "Peak activations: in flight on rank 0, in chunk-micro-batches and in full-stage units " +
        "(chunks / V).",
    );
    console.log(
      values["simulated-only"]
        ? "Measured columns skipped (--simulated-only / SCHEDULES_BENCH_MEASURE=0)."
        : `Measured: one Deno worker per rank, synthetic actions F = I = W = ${ms} ms ` +
          `(B = ${2 * ms} ms, blocking sleep); one iteration: median of ${repeats} runs after ` +
          `a warm-up; steady state: one run of ${iterations} iterations, median period from ` +
          `iteration ${steadyFrom} on; ${seconds.toFixed(1)} s in all.`,
    );
    if (runs.length > 0) console.log(`${verdict(runs)}\n`);
  }
}

// The simulator's own speed at p = 4, m = 8, one group per schedule. In
// `deno run` these registrations do nothing.
for (const name of SCHEDULE_NAMES) {
  let schedule;
  try {
    schedule = generateSchedule(name, { ranks: BENCH_P, microBatches: BENCH_M });
  } catch (err) {
    if (err instanceof RangeError) continue;
    throw err;
  }
  const group = `simulator speed: ${name} p=${BENCH_P} m=${BENCH_M}`;
  Deno.bench({
    name: `${name} generate`,
    group,
    fn() {
      generateSchedule(name, { ranks: BENCH_P, microBatches: BENCH_M });
    },
  });
  Deno.bench({
    name: `${name} simulate 1 it`,
    group,
    baseline: true,
    fn() {
      simulate(schedule);
    },
  });
  Deno.bench({
    name: `${name} simulate ${iterations} it`,
    group,
    fn() {
      simulate(schedule, { iterations });
    },
  });
}
