/**
 * Chrome trace (Trace Event Format) of a pipeline timeline, for
 * `chrome://tracing` and https://ui.perfetto.dev: one complete event
 * (`ph: "X"`) per pass, one track per rank.
 *
 * @module
 */

import { checkOptionsObject } from "../../text/nearest.ts";
import { formatAction } from "../schedule/action.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import { checkEvents, timeSpan } from "./_timeline.ts";
import { describeValue } from "../../text/describe.ts";

/** One entry of a Chrome trace's `traceEvents`. */
export interface ChromeTraceEvent {
  /** Event name, e.g. `"F mb3 s1"`, or a metadata name such as `"thread_name"`. */
  readonly name: string;
  /** Phase: `"X"` complete event, `"M"` metadata. */
  readonly ph: "X" | "M";
  /** Process id. */
  readonly pid: number;
  /** Thread id: the rank. */
  readonly tid: number;
  /** Start in microseconds (complete events only). */
  readonly ts?: number;
  /** Duration in microseconds (complete events only). */
  readonly dur?: number;
  /** Category: the action kind (complete events only). */
  readonly cat?: string;
  /** Extra data shown when the event is selected. */
  readonly args?: Readonly<Record<string, string | number>>;
}

/** A Chrome trace document; `JSON.stringify` it to write a `.json` file. */
export interface ChromeTrace {
  /** Metadata events first, then one complete event per pass in start order. */
  readonly traceEvents: readonly ChromeTraceEvent[];
  /** How viewers display times. */
  readonly displayTimeUnit: "ms";
}

/** Options of {@linkcode toChromeTrace}. */
export interface ChromeTraceOptions {
  /**
   * Microseconds per unit of the events' times; default 1000 (times in
   * milliseconds, as measured runs record them; a simulated unit shows as 1 ms).
   */
  readonly microsecondsPerUnit?: number;
  /** Number of rank tracks; default one more than the highest rank in the events. */
  readonly ranks?: number;
  /**
   * `false` (default): one process (`pid` 0, named `processName`) with one
   * thread per rank (`tid` = rank), so all ranks show in one group.
   * `true`: also one process per rank (`pid` = rank), as per-rank profiles are.
   */
  readonly processPerRank?: boolean;
  /** Name of the process; default `"pipeline"`. */
  readonly processName?: string;
}

/**
 * Converts timed events to a Chrome trace. Times are shifted so that the
 * earliest event starts at 0. Each pass is named `F mb3 s1` (kind,
 * micro-batch, stage) with `args` holding `stage`, `microBatch`, `iteration`
 * and the PyTorch text form `action`; each rank's track is named `rank r`
 * through `thread_name` metadata and sorted by rank.
 *
 * @example
 * ```ts
 * import { toChromeTrace } from "@conveyor/core/analysis";
 * const trace = toChromeTrace([
 *   { rank: 1, action: { kind: "F", stage: 1, microBatch: 3 }, iteration: 0, start: 2, end: 3 },
 * ]);
 * const x = trace.traceEvents.find((e) => e.ph === "X");
 * console.log(x?.name, x?.ts, x?.dur); // "F mb3 s1" 0 1000
 * ```
 */
export function toChromeTrace(
  events: readonly TimedEvent[],
  options: ChromeTraceOptions = {},
): ChromeTrace {
  checkOptionsObject(options, ["microsecondsPerUnit", "ranks"], "toChromeTrace: ");
  const usPerUnit = options.microsecondsPerUnit ?? 1000;
  if (!Number.isFinite(usPerUnit) || usPerUnit <= 0) {
    throw new RangeError(
      `microsecondsPerUnit must be a positive finite number, got ${describeValue(usPerUnit)}`,
    );
  }
  const rows = checkEvents(events, options.ranks);
  const perRank = options.processPerRank ?? false;
  const processName = options.processName ?? "pipeline";
  const pidOf = (rank: number): number => (perRank ? rank : 0);

  const meta: ChromeTraceEvent[] = [];
  if (!perRank) {
    meta.push({ name: "process_name", ph: "M", pid: 0, tid: 0, args: { name: processName } });
  }
  for (let r = 0; r < rows; r++) {
    const pid = pidOf(r);
    if (perRank) {
      meta.push({ name: "process_name", ph: "M", pid, tid: r, args: { name: `rank ${r}` } });
      meta.push({ name: "process_sort_index", ph: "M", pid, tid: r, args: { sort_index: r } });
    }
    meta.push({ name: "thread_name", ph: "M", pid, tid: r, args: { name: `rank ${r}` } });
    meta.push({ name: "thread_sort_index", ph: "M", pid, tid: r, args: { sort_index: r } });
  }

  const [t0] = timeSpan(events);
  const us = (t: number): number => Math.round((t - t0) * usPerUnit * 1000) / 1000;
  const passes: ChromeTraceEvent[] = [...events]
    .sort((a, b) => a.start - b.start || a.rank - b.rank)
    .map((e) => ({
      name: `${e.action.kind} mb${e.action.microBatch} s${e.action.stage}`,
      ph: "X",
      cat: e.action.kind,
      pid: pidOf(e.rank),
      tid: e.rank,
      ts: us(e.start),
      dur: Math.round((e.end - e.start) * usPerUnit * 1000) / 1000,
      args: {
        stage: e.action.stage,
        microBatch: e.action.microBatch,
        iteration: e.iteration,
        action: formatAction(e.action),
      },
    }));
  return { traceEvents: [...meta, ...passes], displayTimeUnit: "ms" };
}
