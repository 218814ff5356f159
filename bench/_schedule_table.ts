/**
 * The pure part of `bench/schedules_bench.ts`: one row per schedule with the
 * simulated figures (from `bench/bubble_table.ts`'s `bubbleRows`), filled in
 * with the measured figures of `bench/measured_vs_simulated.ts`'s
 * `measureSchedule` when a run on workers was made, and rendered as one
 * Markdown table (readable in a terminal, pasted as is into the README).
 *
 * @module
 */

import type { ScheduleName } from "../src/pipeline/schedule/generate.ts";
import { bubbleRows } from "./bubble_table.ts";
import type { RuntimeRow } from "./measured_vs_simulated.ts";

/** One schedule's row. Fractions are 0…1; NaN marks a figure that does not exist or was not measured. */
export interface ScheduleTableRow {
  schedule: ScheduleName;
  p: number;
  m: number;
  /** Model chunks per rank. */
  v: number;
  /** Back-to-back iterations behind the steady-state figures. */
  iterations: number;
  /** Simulated bubble of one iteration (F = I = W, B = 2F, no communication delay). */
  bubble: number;
  /** Simulated steady-state bubble over `iterations` iterations. */
  steadyBubble: number;
  /** `estimateBubbleFraction` (the reference sheet); NaN where there is no closed form. */
  formulaBubble: number;
  /** Simulated peak in-flight activations on rank 0, in chunk-micro-batches. */
  peak0: number;
  /** The same peak in full-stage units (a chunk is 1/v of a rank's layers): `peak0 / v`. */
  peak0Stages: number;
  /** Synthetic milliseconds per F, I and W on the workers (B = 2×); NaN when not measured. */
  ms: number;
  /** Measured bubble of one iteration on workers (median run). */
  measuredBubble: number;
  /** Measured steady-state bubble over `iterations` iterations on workers. */
  measuredSteadyBubble: number;
  /** Measured makespan / simulated makespan, one iteration. */
  makespanRatio: number;
  /** Measured makespan / simulated makespan over `iterations` iterations. */
  steadyMakespanRatio: number;
}

/**
 * Simulated rows of every schedule that accepts (p, m), measured columns NaN.
 * Throws a RangeError for a bad p, m or iterations (iterations must be ≥ 2
 * for a steady state).
 */
export function simulatedTableRows(p: number, m: number, iterations: number): ScheduleTableRow[] {
  for (const [what, v] of [["ranks", p], ["microBatches", m]] as const) {
    if (!Number.isInteger(v) || v < 1) {
      throw new RangeError(`${what} must be a positive integer, got ${v}`);
    }
  }
  if (!Number.isInteger(iterations) || iterations < 2) {
    throw new RangeError(
      `iterations must be an integer >= 2 for a steady state, got ${iterations}`,
    );
  }
  return bubbleRows([p], [m], iterations).map((r) => ({
    schedule: r.schedule,
    p: r.p,
    m: r.m,
    v: r.v,
    iterations,
    bubble: r.bubble,
    steadyBubble: r.steadyBubble,
    formulaBubble: r.formulaBubble,
    peak0: r.peak0,
    peak0Stages: r.peak0 / r.v,
    ms: NaN,
    measuredBubble: NaN,
    measuredSteadyBubble: NaN,
    makespanRatio: NaN,
    steadyMakespanRatio: NaN,
  }));
}

/**
 * Fills a simulated row with a run on workers of the same schedule and
 * shape; a TypeError when they differ (a mix-up would print a wrong table).
 */
export function withMeasurement(row: ScheduleTableRow, run: RuntimeRow): ScheduleTableRow {
  if (
    run.schedule !== row.schedule || run.p !== row.p || run.m !== row.m ||
    run.iterations !== row.iterations
  ) {
    throw new TypeError(
      `measurement of ${run.schedule} p=${run.p} m=${run.m} x${run.iterations} does not match ` +
        `row ${row.schedule} p=${row.p} m=${row.m} x${row.iterations}`,
    );
  }
  return {
    ...row,
    ms: run.ms,
    measuredBubble: run.measuredBubble,
    measuredSteadyBubble: run.measuredSteadyBubble,
    makespanRatio: run.ratio,
    steadyMakespanRatio: run.steadyRatio,
  };
}

/** Text for a missing figure. */
export const MISSING = "—";

const pct = (v: number): string => Number.isNaN(v) ? MISSING : `${(v * 100).toFixed(1)}%`;
// Peaks print as short as they are (5.5, 8); ratios with a fixed 3 decimals.
const num = (v: number, digits: number): string =>
  Number.isNaN(v) ? MISSING : String(Number(v.toFixed(digits)));
const fixed = (v: number, digits: number): string => Number.isNaN(v) ? MISSING : v.toFixed(digits);

/** Column headers of {@linkcode formatScheduleTable}, in order. */
export function tableHeader(iterations: number): string[] {
  return [
    "schedule",
    "V",
    "bubble sim",
    `steady sim (${iterations} it)`,
    "formula",
    "peak r0 (chunks)",
    "peak r0 (stages)",
    "bubble measured",
    `steady measured (${iterations} it)`,
    "makespan meas/sim",
    `meas/sim (${iterations} it)`,
  ];
}

/** Renders rows as an aligned Markdown table (every row must share `iterations`). */
export function formatScheduleTable(rows: readonly ScheduleTableRow[]): string {
  const iterations = rows[0]?.iterations ?? 0;
  const header = tableHeader(iterations);
  const body = rows.map((r) => [
    r.schedule,
    String(r.v),
    pct(r.bubble),
    pct(r.steadyBubble),
    pct(r.formulaBubble),
    num(r.peak0, 2),
    num(r.peak0Stages, 2),
    pct(r.measuredBubble),
    pct(r.measuredSteadyBubble),
    fixed(r.makespanRatio, 3),
    fixed(r.steadyMakespanRatio, 3),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join(" | ")} |`;
  const rule = `|${
    widths.map((w, i) => i === 0 ? `:${"-".repeat(w + 1)}` : `${"-".repeat(w + 1)}:`).join("|")
  }|`;
  return [line(header), rule, ...body.map(line)].join("\n");
}
