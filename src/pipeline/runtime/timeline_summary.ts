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

import type { TimedEvent } from "../schedule.ts";

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
   * iterations (an iteration ends when its last action over all ranks ends).
   */
  readonly period?: number;
  /** With 2 or more iterations: `1 − (Σ busy / iterations) / (ranks · period)`. */
  readonly steadyStateBubble?: number;
}

/**
 * Summarises events of `ranks` ranks as `simulate` does: makespan from the
 * first start to the last end, busy time per rank, the bubble fraction, and
 * with several iterations the period and steady-state bubble.
 *
 * @example
 * ```ts
 * import { summarizeTimeline } from "@conveyor/core";
 * const F = (stage: number) => ({ kind: "F" as const, stage, microBatch: 0 });
 * const s = summarizeTimeline([
 *   { rank: 0, action: F(0), iteration: 0, start: 0, end: 1 },
 *   { rank: 1, action: F(1), iteration: 0, start: 1, end: 2 },
 * ], 2);
 * console.log(s.makespan, s.bubbleFraction); // 2 0.5
 * ```
 */
export function summarizeTimeline(events: readonly TimedEvent[], ranks: number): TimelineSummary {
  if (!Array.isArray(events)) {
    throw new TypeError(`events must be an array of TimedEvent, got ${typeof events}`);
  }
  if (!Number.isInteger(ranks) || ranks < 1) {
    throw new RangeError(`ranks must be a positive integer, got ${ranks}`);
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
      throw new RangeError(`events[${i}] must have finite start <= end, got ${e.start}..${e.end}`);
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
  const ends = [...iterEnd.entries()].sort((a, b) => a[0] - b[0]).map(([, end]) => end);
  const period = ends[ends.length - 1] - ends[ends.length - 2];
  return { ...result, period, steadyStateBubble: bubble(totalBusy / iterations, period) };
}
