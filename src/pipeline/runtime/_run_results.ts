// Shared by the rank groups: checking run options and assembling the
// ranks' results into one RankGroupRunResult. Not exported from the package.

import type { TimedEvent } from "../schedule/schedule.ts";
import { summarizeTimeline } from "../analysis/timeline_summary.ts";
import type { RankGroupRunOptions, RankGroupRunResult } from "./rank_group.ts";
import type { GradNorm, RolledBack } from "./step_validation.ts";
import { describeValue } from "../../text/describe.ts";

/** Checked run options: the iteration count and each rank's payloads. */
export interface CheckedRun {
  readonly iterations: number;
  readonly forwardOnly: boolean;
  /** Payloads of `rank` for the run's iterations (undefined: none). */
  payloads(rank: number): unknown[] | undefined;
}

/** Checks `options` (RangeError/TypeError naming the value) before any work. */
export function checkRunOptions(options: RankGroupRunOptions | undefined): CheckedRun {
  const o = options ?? {};
  if (o === null || typeof o !== "object") {
    throw new TypeError(
      `run options must be an object { iterations, payload, forwardOnly }, got ${describeValue(o)}`,
    );
  }
  const iterations = o.iterations ?? 1;
  if (!Number.isInteger(iterations) || iterations < 1) {
    throw new RangeError(`iterations must be a positive integer, got ${describeValue(iterations)}`);
  }
  const payload = o.payload;
  if (payload !== undefined && typeof payload !== "function") {
    throw new TypeError(`payload must be a function (rank, index) => value, got ${typeof payload}`);
  }
  return {
    iterations,
    forwardOnly: o.forwardOnly === true,
    payloads: (rank) =>
      payload === undefined
        ? undefined
        : Array.from({ length: iterations }, (_, i) => payload(rank, i)),
  };
}

/** One rank's share of a run. */
export interface RankShare {
  readonly events: readonly TimedEvent[];
  readonly reports: readonly unknown[];
  readonly rolledBack?: readonly RolledBack[];
  readonly gradNorms?: readonly GradNorm[];
}

/** The run's result: every rank's events on one clock from the first start (t0 = 0). */
export function assembleRun(
  ranks: number,
  firstIteration: number,
  shares: readonly RankShare[],
): RankGroupRunResult {
  let t0 = Infinity;
  for (const s of shares) for (const e of s.events) t0 = Math.min(t0, e.start);
  if (!Number.isFinite(t0)) t0 = performance.now();
  const events = shares.flatMap((s) =>
    s.events.map((e) => ({ ...e, start: e.start - t0, end: e.end - t0 }))
  ).sort((a, b) => a.start - b.start || a.rank - b.rank);
  // Every rank sees the same verdicts; the union guards against a share without them.
  const rolled = new Map<number, RolledBack>();
  for (const s of shares) for (const r of s.rolledBack ?? []) rolled.set(r.iteration, r);
  const norms = new Map<number, GradNorm>();
  for (const s of shares) for (const n of s.gradNorms ?? []) norms.set(n.iteration, n);
  return {
    ...summarizeTimeline(events, ranks),
    firstIteration,
    events,
    reports: shares.map((s) => s.reports),
    rolledBack: [...rolled.values()].sort((a, b) => a.iteration - b.iteration),
    gradNorms: [...norms.values()].sort((a, b) => a.iteration - b.iteration),
    startTime: t0,
  };
}
