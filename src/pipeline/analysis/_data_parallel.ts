// The simulator's data-parallel part: its options checked, and each stage's
// all-reduce placed after the stage's last backward. Not exported from the
// package.

import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import { type AllReduceSpan, type DataParallelOptions, ringAllReduceTime } from "./all_reduce.ts";
import { describeValue } from "../../text/describe.ts";

/** Checked data-parallel options: D and each stage's bytes and all-reduce time. */
export interface DataParallelPlan {
  readonly replicas: number;
  readonly bytes: readonly number[];
  readonly times: readonly number[];
}

/**
 * Checks the data-parallel options against `stages` stages and the
 * iteration count; `null` when D is 1 or absent (nothing to charge).
 */
export function checkDataParallel(
  options: DataParallelOptions,
  stages: number,
  iterations: number,
): DataParallelPlan | null {
  const d = options.dataParallel ?? 1;
  if (!Number.isInteger(d) || d < 1) {
    throw new RangeError(`dataParallel must be a positive integer, got ${describeValue(d)}`);
  }
  // What is given is checked even when D = 1 (and then unused).
  const g = options.gradientBytes;
  const bytes = g === undefined
    ? null
    : typeof g === "number"
    ? new Array<number>(stages).fill(g)
    : g;
  if (bytes !== null) {
    if (!Array.isArray(bytes) || bytes.length !== stages) {
      throw new RangeError(
        `gradientBytes must be a number or an array of one number per stage (${stages}), got ${
          Array.isArray(bytes) ? `${bytes.length} numbers` : typeof bytes
        }`,
      );
    }
    bytes.forEach((b, s) => {
      if (typeof b !== "number" || !Number.isFinite(b) || b < 0) {
        throw new RangeError(
          `gradientBytes[${s}] must be a finite number >= 0, got ${describeValue(b)}`,
        );
      }
    });
  }
  const unitMs = options.unitMs ?? 1;
  // ringAllReduceTime checks the link and the unit.
  if (options.link !== undefined) ringAllReduceTime(options.link, 0, 1, unitMs);
  else ringAllReduceTime({ latencyMs: 0, bytesPerMs: 1 }, 0, 1, unitMs);
  if (d === 1) return null;
  if (iterations !== 1) {
    throw new RangeError(
      `dataParallel ${d} simulates one step: iterations must be 1, got ${
        describeValue(iterations)
      }`,
    );
  }
  if (options.link === undefined) {
    throw new TypeError(`dataParallel ${d} needs a link { latencyMs, bytesPerMs }`);
  }
  if (bytes === null) {
    throw new TypeError(`dataParallel ${d} needs gradientBytes (one number, or one per stage)`);
  }
  const times = bytes.map((b) => ringAllReduceTime(options.link!, b, d, unitMs));
  return { replicas: d, bytes: [...bytes], times };
}

/**
 * Each stage's all-reduce: it starts when the stage's last backward (W, or
 * B when not split) of the step has ended, and lasts the stage's ring time.
 * The all-reduces of one rank share its link: they run one at a time, in
 * the order their stages become ready (the lower stage first on a tie).
 * Sorted by start, then stage.
 */
export function allReduceSpans(
  schedule: Schedule,
  events: readonly TimedEvent[],
  plan: DataParallelPlan,
): AllReduceSpan[] {
  const stages = schedule.stageToRank.length;
  const ready = new Array<number>(stages).fill(-Infinity);
  for (const e of events) {
    const k = e.action.kind;
    if ((k === "B" || k === "W") && e.end > ready[e.action.stage]) ready[e.action.stage] = e.end;
  }
  const order = Array.from({ length: stages }, (_, s) => s)
    .sort((a, b) => ready[a] - ready[b] || a - b);
  const linkFree = new Array<number>(schedule.ranks).fill(0);
  const spans: AllReduceSpan[] = [];
  for (const s of order) {
    const rank = schedule.stageToRank[s];
    const start = Math.max(ready[s], linkFree[rank]);
    const end = start + plan.times[s];
    linkFree[rank] = end;
    spans.push({ stage: s, rank, iteration: 0, start, end, bytes: plan.bytes[s] });
  }
  return spans.sort((a, b) => a.start - b.start || a.stage - b.stage);
}
