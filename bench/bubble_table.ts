/**
 * Prints the simulated bubble fraction (one iteration and steady state) and
 * peak in-flight activations of every schedule on a grid of (p, m), beside the
 * reference sheet's formula values, with T_F = T_B = T_W = 1 and no
 * communication delay unless flags say otherwise.
 *
 * ```sh
 * deno run -A bench/bubble_table.ts                      # p = 2, 4, 8; m = 8, 16, 32
 * deno run -A bench/bubble_table.ts --ranks 4 --microbatches 8
 * deno run -A bench/bubble_table.ts --json               # one JSON object per row
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { estimateBubbleFraction } from "../src/pipeline/analysis/bubble_estimate.ts";
import {
  generateSchedule,
  SCHEDULE_NAMES,
  type ScheduleName,
} from "../src/pipeline/schedule/generate.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";

/** One row of the table. Peaks are in chunk-micro-batches on rank 0. */
export interface BubbleRow {
  schedule: ScheduleName;
  p: number;
  m: number;
  v: number;
  /** Simulated bubble of one iteration. */
  bubble: number;
  /** Simulated steady-state bubble over `iterations` back-to-back iterations. */
  steadyBubble: number;
  /** The reference sheet's bubble (`estimateBubbleFraction`); NaN where it has none. */
  formulaBubble: number;
  /** Simulated peak in-flight activations on rank 0 (chunk-micro-batches). */
  peak0: number;
  /** The reference sheet's peak on rank 0 in chunk-micro-batches; NaN where it has none. */
  formulaPeak0: number;
}

/**
 * The sheet's peak activations on rank 0, converted to chunk-micro-batches
 * (a chunk holds 1/v of a stage's layers, so p·M_B is v·p chunk units).
 */
export function formulaPeak(name: ScheduleName, p: number, m: number, v: number): number {
  switch (name) {
    case "gpipe":
      return m;
    case "1f1b":
    case "zb-h1":
      return p;
    case "interleaved-1f1b":
      // p·M_B·(1 + (p−1)/(v·p)) with M_B = v chunk units.
      return v * p + p - 1;
    case "zb-h2":
      return 2 * p - 1;
    case "zb-v":
      return 2 * p;
    // Controllable Memory's limits, in full stages: ⌊(p+2)/2⌋ and ⌊(p+4)/3⌋.
    case "v-half":
      return 2 * Math.floor((p + 2) / 2);
    case "v-min":
      return 2 * Math.floor((p + 4) / 3);
    default:
      return NaN;
  }
}

/** Simulates every schedule on the grid; combinations a generator refuses are left out. */
export function bubbleRows(
  ranks: readonly number[],
  microBatches: readonly number[],
  iterations: number,
): BubbleRow[] {
  const rows: BubbleRow[] = [];
  for (const p of ranks) {
    for (const m of microBatches) {
      for (const name of SCHEDULE_NAMES) {
        let schedule;
        try {
          schedule = generateSchedule(name, { ranks: p, microBatches: m });
        } catch (err) {
          if (err instanceof RangeError) continue;
          throw err;
        }
        const v = schedule.stagesPerRank;
        const one = simulate(schedule);
        const many = simulate(schedule, { iterations });
        rows.push({
          schedule: name,
          p,
          m,
          v,
          bubble: one.bubbleFraction,
          steadyBubble: many.steadyStateBubble ?? NaN,
          formulaBubble: estimateBubbleFraction(name, p, m),
          peak0: one.peakActivations[0],
          formulaPeak0: formulaPeak(name, p, m, v),
        });
      }
    }
  }
  return rows;
}

function list(flag: string, text: string): number[] {
  const values = text.split(",").map((s) => Number(s.trim()));
  for (const v of values) {
    if (!Number.isInteger(v) || v < 1) {
      throw new RangeError(
        `--${flag} must be a comma-separated list of positive integers, got "${text}"`,
      );
    }
  }
  return values;
}

function pct(v: number): string {
  return Number.isNaN(v) ? "-" : `${(v * 100).toFixed(2)}%`;
}

/** Renders rows as an aligned text table with a header. */
export function formatTable(rows: readonly BubbleRow[], iterations: number): string {
  const header = [
    "schedule",
    "p",
    "m",
    "v",
    "bubble 1 it",
    `steady (${iterations} it)`,
    "formula",
    "peak r0",
    "formula peak",
  ];
  const body = rows.map((r) => [
    r.schedule,
    String(r.p),
    String(r.m),
    String(r.v),
    pct(r.bubble),
    pct(r.steadyBubble),
    pct(r.formulaBubble),
    String(r.peak0),
    Number.isNaN(r.formulaPeak0) ? "-" : String(r.formulaPeak0),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  const out = [line(header), widths.map((w) => "-".repeat(w)).join("  ")];
  let last = "";
  for (let i = 0; i < rows.length; i++) {
    const key = `${rows[i].p},${rows[i].m}`;
    if (last !== "" && key !== last) out.push("");
    last = key;
    out.push(line(body[i]));
  }
  return out.join("\n");
}

if (import.meta.main) {
  const values = benchArgs("bench/bubble_table.ts", {
    ranks: { type: "string", default: "2,4,8" },
    microbatches: { type: "string", default: "8,16,32" },
    iterations: { type: "string", default: "4" },
    json: { type: "boolean", default: false },
  });
  const iterations = list("iterations", values.iterations)[0];
  if (iterations < 2) throw new RangeError(`--iterations must be >= 2, got ${iterations}`);
  const rows = bubbleRows(
    list("ranks", values.ranks),
    list("microbatches", values.microbatches),
    iterations,
  );
  if (values.json) {
    for (const r of rows) console.log(JSON.stringify(r));
  } else {
    console.log(formatTable(rows, iterations));
    console.log(
      "\nT_F = T_B = T_W = 1, no communication delay. Peaks: in-flight activations on rank 0 in" +
        "\nchunk-micro-batches (one chunk = 1/v of a stage). formula: the reference sheet" +
        "\n(estimateBubbleFraction); for zb-h2 and zb-v it is the steady-state figure, for the" +
        "\nothers a single iteration's; '-' where the sheet gives none.",
    );
  }
}
