// Shared helpers for the timeline renderers (ASCII, SVG, Chrome trace).
// Not exported from the package.

import { formatAction } from "../schedule/action.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import type { AllReduceSpan } from "../analysis/all_reduce.ts";
import { describeValue } from "../../text/describe.ts";

/** Anything placed on a row in time: an event, an all-reduce span, a rendered cell. */
export interface Timed {
  readonly rank: number;
  readonly start: number;
  readonly end: number;
}

/** Checks events before any rendering work and returns the number of rank rows. */
export function checkEvents(events: readonly TimedEvent[], ranks?: number): number {
  if (!Array.isArray(events)) {
    throw new TypeError(`events must be an array of TimedEvent, got ${typeof events}`);
  }
  if (ranks !== undefined && (!Number.isInteger(ranks) || ranks < 0)) {
    throw new RangeError(`ranks must be a non-negative integer, got ${describeValue(ranks)}`);
  }
  let rows = ranks ?? 0;
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (e === null || typeof e !== "object" || e.action === null || typeof e.action !== "object") {
      throw new TypeError(
        `events[${i}] must be a TimedEvent with an action, got ${describeValue(e)}`,
      );
    }
    if (!Number.isInteger(e.rank) || e.rank < 0) {
      throw new RangeError(
        `events[${i}].rank must be a non-negative integer, got ${describeValue(e.rank)}`,
      );
    }
    if (!Number.isFinite(e.start) || !Number.isFinite(e.end) || e.end < e.start) {
      throw new RangeError(
        `events[${i}] (${formatAction(e.action)}) must have finite start <= end, got ${
          describeValue(e.start)
        }..${e.end}`,
      );
    }
    if (e.rank + 1 > rows) rows = e.rank + 1;
  }
  return rows;
}

/**
 * Checks all-reduce spans (`where` names the option) before any rendering
 * work; returns them, or an empty list when `spans` is undefined.
 */
export function checkSpans(
  spans: readonly AllReduceSpan[] | undefined,
  where: string,
): readonly AllReduceSpan[] {
  if (spans === undefined) return [];
  if (!Array.isArray(spans)) {
    throw new TypeError(`${where} must be an array of AllReduceSpan, got ${typeof spans}`);
  }
  spans.forEach((s, i) => {
    if (s === null || typeof s !== "object") {
      throw new TypeError(`${where}[${i}] must be an AllReduceSpan, got ${describeValue(s)}`);
    }
    for (const k of ["rank", "stage"] as const) {
      if (!Number.isInteger(s[k]) || s[k] < 0) {
        throw new RangeError(
          `${where}[${i}].${k} must be a non-negative integer, got ${describeValue(s[k])}`,
        );
      }
    }
    if (!Number.isFinite(s.start) || !Number.isFinite(s.end) || s.end < s.start) {
      throw new RangeError(
        `${where}[${i}] (stage ${s.stage}) must have finite start <= end, got ${
          describeValue(s.start)
        }..${s.end}`,
      );
    }
  });
  return spans;
}

/** Earliest start and latest end over all items; [0, 0] when there are none. */
export function timeSpan(events: readonly Timed[]): [number, number] {
  if (events.length === 0) return [0, 0];
  let lo = Infinity;
  let hi = -Infinity;
  for (const e of events) {
    if (e.start < lo) lo = e.start;
    if (e.end > hi) hi = e.end;
  }
  return [lo, hi];
}

/** Items grouped by rank (row), each list sorted by start time (stable). */
export function byRank<T extends Timed>(events: readonly T[], rows: number): T[][] {
  const out: T[][] = Array.from({ length: rows }, () => []);
  for (const e of events) out[e.rank].push(e);
  for (const list of out) list.sort((a, b) => a.start - b.start);
  return out;
}

/**
 * Slot grid: one column per distinct start time over all ranks (times closer
 * than a tiny tolerance count as equal), so actions that start together line
 * up; `null` marks an idle slot. A rank never holds two events in one column:
 * if it would, the later one moves to the next free column.
 */
export function slotGrid<T extends Timed>(events: readonly T[], rows: number): (T | null)[][] {
  const [lo, hi] = timeSpan(events);
  const tol = Math.max(1e-9, (hi - lo) * 1e-9);
  const starts = events.map((e) => e.start).sort((a, b) => a - b);
  const distinct: number[] = [];
  for (const t of starts) {
    if (distinct.length === 0 || t - distinct[distinct.length - 1] > tol) distinct.push(t);
  }
  const column = (t: number): number => {
    let a = 0;
    let b = distinct.length - 1;
    while (a < b) {
      const mid = (a + b) >> 1;
      if (distinct[mid] < t - tol) a = mid + 1;
      else b = mid;
    }
    return a;
  };
  const lanes = byRank(events, rows);
  const grid: (T | null)[][] = lanes.map(() => []);
  for (let r = 0; r < rows; r++) {
    const row = grid[r];
    for (const e of lanes[r]) {
      const c = Math.max(column(e.start), row.length);
      while (row.length < c) row.push(null);
      row.push(e);
    }
  }
  const width = Math.max(0, ...grid.map((row) => row.length));
  for (const row of grid) while (row.length < width) row.push(null);
  return grid;
}
