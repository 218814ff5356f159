/**
 * Makespan, busy and idle time and the bubble fraction of a list of timed
 * events, by the same definitions as `simulate`, so a measured run and its
 * simulation can be compared figure by figure.
 *
 * Measured events come from `runRank`: an action is busy from
 * max(its call, the end of its rank's previous device work) to when its work
 * is done, on WebGPU when the device has run it (not when its commands were
 * recorded), so a rank's events never overlap and busy time is device time.
 * Deno sees WebGPU completion about every 10 ms, so each end may be late by
 * that much and busy time is an upper bound.
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import { describeValue } from "../../text/describe.ts";

/** What {@linkcode summarizeTimeline} reports (times in the events' unit). */
export interface TimelineSummary {
  /** Distinct iterations among the events. */
  readonly iterations: number;
  /** Last end minus first start. */
  readonly makespan: number;
  /** Time each rank spends in actions. */
  readonly busy: readonly number[];
  /** `makespan − busy` per rank. */
  readonly idle: readonly number[];
  /** `1 − Σ busy / (ranks · makespan)`. */
  readonly bubbleFraction: number;
  /**
   * With 2 or more iterations: time between the ends of the last two
   * iterations (an iteration ends when its last action over all ranks ends),
   * or with {@linkcode SummarizeTimelineOptions.steadyFrom} the median of
   * those times from that iteration on.
   */
  readonly period?: number;
  /** With 2 or more iterations: `1 − (Σ busy / iterations) / (ranks · period)`. */
  readonly steadyStateBubble?: number;
}

/** Options of {@linkcode summarizeTimeline}. */
export interface SummarizeTimelineOptions {
  /**
   * Position (0-based, in iteration order among the events) of the first
   * iteration whose period counts: the period is then the median of
   * `end(k) − end(k − 1)` for k from `steadyFrom` to the last iteration.
   * Default: the last iteration only, as `simulate` reports it. A measured
   * run wants several periods after the ramp-up (e.g. 8 iterations from 2):
   * one period alone carries whatever the machine did during it.
   * Must be an integer from 1 to iterations − 1; ignored below 2 iterations.
   */
  readonly steadyFrom?: number;
}

/**
 * Summarises events of `ranks` ranks as `simulate` does: makespan from the
 * first start to the last end, busy time per rank, the bubble fraction, and
 * with several iterations the period and steady-state bubble (see
 * {@linkcode SummarizeTimelineOptions} for a median period).
 *
 * @example
 * ```ts
 * import { summarizeTimeline } from "@conveyor/core/analysis";
 * const F = (stage: number) => ({ kind: "F" as const, stage, microBatch: 0 });
 * const s = summarizeTimeline([
 *   { rank: 0, action: F(0), iteration: 0, start: 0, end: 1 },
 *   { rank: 1, action: F(1), iteration: 0, start: 1, end: 2 },
 * ], 2);
 * console.log(s.makespan, s.bubbleFraction); // 2 0.5
 * // Iterations end at 2, 5, 7, 9: periods 3, 2, 2 from the second on, median 2.
 * const it = (iteration: number, end: number) =>
 *   ({ rank: 0, action: F(0), iteration, start: end - 1, end });
 * const m = summarizeTimeline([it(0, 2), it(1, 5), it(2, 7), it(3, 9)], 1, { steadyFrom: 1 });
 * console.log(m.period, m.steadyStateBubble); // 2 0.5
 * ```
 */
export function summarizeTimeline(
  events: readonly TimedEvent[],
  ranks: number,
  options: SummarizeTimelineOptions = {},
): TimelineSummary {
  if (!Array.isArray(events)) {
    throw new TypeError(`events must be an array of TimedEvent, got ${typeof events}`);
  }
  if (!Number.isInteger(ranks) || ranks < 1) {
    throw new RangeError(`ranks must be a positive integer, got ${describeValue(ranks)}`);
  }
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object { steadyFrom }, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, ["steadyFrom"], "summarizeTimeline: ");
  const from = options.steadyFrom;
  if (from !== undefined && (!Number.isInteger(from) || from < 1)) {
    throw new RangeError(
      `steadyFrom must be an integer >= 1 (a period needs an earlier iteration), got ${
        describeValue(from)
      }`,
    );
  }
  const busy = new Array<number>(ranks).fill(0);
  const iterEnd = new Map<number, number>();
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (!Number.isInteger(e?.rank) || e.rank < 0 || e.rank >= ranks) {
      throw new RangeError(`events[${i}].rank must be in [0, ${ranks - 1}], got ${e?.rank}`);
    }
    if (!Number.isFinite(e.start) || !Number.isFinite(e.end) || e.end < e.start) {
      throw new RangeError(
        `events[${i}] must have finite start <= end, got ${describeValue(e.start)}..${e.end}`,
      );
    }
    busy[e.rank] += e.end - e.start;
    if (e.start < lo) lo = e.start;
    if (e.end > hi) hi = e.end;
    iterEnd.set(e.iteration, Math.max(iterEnd.get(e.iteration) ?? -Infinity, e.end));
  }
  const makespan = events.length === 0 ? 0 : hi - lo;
  const totalBusy = busy.reduce((a, b) => a + b, 0);
  const bubble = (work: number, span: number) =>
    span > 0 ? Math.max(0, 1 - work / (ranks * span)) : 0;
  const iterations = iterEnd.size;
  const result = {
    iterations,
    makespan,
    busy,
    idle: busy.map((b) => makespan - b),
    bubbleFraction: bubble(totalBusy, makespan),
  };
  if (iterations < 2) return result;
  if (from !== undefined && from > iterations - 1) {
    throw new RangeError(
      `steadyFrom must be at most iterations - 1 = ${iterations - 1}, got ${describeValue(from)}`,
    );
  }
  const ends = [...iterEnd.entries()].sort((a, b) => a[0] - b[0]).map(([, end]) => end);
  const first = from ?? iterations - 1;
  const periods = ends.slice(first).map((end, k) => end - ends[first + k - 1]).sort((a, b) =>
    a - b
  );
  const mid = periods.length >> 1;
  const period = periods.length % 2 === 1 ? periods[mid] : (periods[mid - 1] + periods[mid]) / 2;
  return { ...result, period, steadyStateBubble: bubble(totalBusy / iterations, period) };
}
