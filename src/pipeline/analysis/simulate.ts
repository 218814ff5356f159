/**
 * Schedule simulator: runs each rank's action list with given costs and a
 * communication delay, every action as early as its inputs allow, and
 * reports makespan, busy and idle time, the bubble fraction, peak in-flight
 * activations and the timed events; with data parallelism, each stage's
 * gradient all-reduce too.
 *
 * @module
 */

import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import { type ActionCosts, checkComm, resolveCosts } from "../schedule/costs.ts";
import { checkOptionSpelling } from "../../text/nearest.ts";

export type { ActionCosts, CostValue } from "../schedule/costs.ts";
import { peakActivations, runSchedule } from "../schedule/engine.ts";
import { checkStructure, structureError } from "./_structure.ts";
import { ScheduleDeadlockError } from "./validate.ts";
import type { AllReduceSpan, DataParallelOptions } from "./all_reduce.ts";
import { allReduceSpans, checkDataParallel } from "./_data_parallel.ts";
import type { TimelineSummary } from "./timeline_summary.ts";
import { describeValue } from "../../text/describe.ts";

/** Options of {@linkcode simulate}. */
export interface SimulateOptions extends DataParallelOptions {
  /** Costs per action kind (see {@linkcode ActionCosts}); defaults F = I = W = 1, B = 2. */
  readonly costs?: ActionCosts;
  /** Delay added when a result crosses to another rank (default 0). */
  readonly comm?: number;
  /**
   * Iterations run back to back (default 1). Each rank starts its list again
   * right after its own last action: every stage steps its optimizer after
   * its own last backward, with no global barrier.
   */
  readonly iterations?: number;
}

const SIMULATE_OPTIONS: readonly (keyof SimulateOptions)[] = [
  "costs",
  "comm",
  "iterations",
  "dataParallel",
  "link",
  "gradientBytes",
  "unitMs",
];

/**
 * What {@linkcode simulate} reports: the {@linkcode TimelineSummary} of its
 * events (all ranks start at 0; `bubbleFraction` is the Zero Bubble paper's
 * `(cost − m(T_F+T_B+T_W)) / cost` with equal work on every rank), the peak
 * activations and the events. Times are in the unit of the costs.
 */
export interface SimulationResult extends TimelineSummary {
  /**
   * Peak in-flight activations per rank, in stage-micro-batches: +1 when an
   * F starts, −1 when the pass that last needs them ends (a B, or the W after
   * an I/W split: W still reads the stored layer inputs).
   */
  readonly peakActivations: readonly number[];
  /** Every action with its start and end, sorted by start, then rank. */
  readonly events: readonly TimedEvent[];
  /**
   * With `dataParallel` D > 1: each stage's gradient all-reduce, sorted by
   * start, then stage. The makespan then runs to the last one's end.
   */
  readonly allReduce?: readonly AllReduceSpan[];
}

/** The most events one simulation may produce (actions × iterations). */
export const MAX_SIMULATED_EVENTS = 6_000_000;

/**
 * Simulates a schedule. Each rank runs its actions in list order, one at a
 * time, each as early as its inputs allow: F(s, mb) needs F(s−1, mb);
 * B or I(s, mb) needs F(s, mb) and the input gradient of B or I(s+1, mb);
 * W(s, mb) needs I(s, mb). A result that crosses ranks arrives `comm`
 * later. Receives block and sends do not. Throws as `validateSchedule` does
 * for a malformed schedule and a {@linkcode ScheduleDeadlockError} when
 * the order deadlocks.
 *
 * With `dataParallel` D > 1 the schedule runs on D replicas of the
 * pipeline at once, each on its shard of the batch (the same timings on
 * every replica), and each stage averages its gradients over its D
 * replicas by a ring all-reduce on `link`: `2(D − 1)/D · bytes / bytesPerMs
 * + 2(D − 1) · latencyMs` ms (see `ringAllReduceTime`), starting when the
 * stage's last backward (W, or B when not split) of the step has ended,
 * while the other stages go on computing. A rank's all-reduces share its
 * link and run one at a time. The stage's optimizer step follows its
 * all-reduce, and the step ends when every stage has stepped: the makespan
 * is the last all-reduce's end when that is later than the last action.
 * The all-reduce is not counted as busy time (it is communication).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule, simulate } from "@conveyor/core";
 * const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
 * assert.equal(simulate(s).makespan, 9); // stage 1's last B ends at 7, stage 0's at 9
 * const link = { latencyMs: 0.5, bytesPerMs: 100 };
 * const r = simulate(s, { dataParallel: 2, link, gradientBytes: [100, 400] });
 * // D = 2: 100 bytes take 1 + 1 = 2 (stage 0: 9..11), 400 bytes 4 + 1 = 5 (stage 1: 7..12).
 * assert.deepEqual(r.allReduce?.map((a) => [a.stage, a.start, a.end]), [[1, 7, 12], [0, 9, 11]]);
 * assert.equal(r.makespan, 12);
 * const p = simulate(generateSchedule("1f1b", { ranks: 4, microBatches: 8 }));
 * assert.equal(p.bubbleFraction.toFixed(3), "0.273");
 * ```
 */
export function simulate(schedule: Schedule, options: SimulateOptions = {}): SimulationResult {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, SIMULATE_OPTIONS, "simulate: ");
  const iterations = options.iterations ?? 1;
  if (!Number.isInteger(iterations) || iterations < 1) {
    throw new RangeError(`iterations must be a positive integer, got ${describeValue(iterations)}`);
  }
  const comm = checkComm(options.comm);
  const perIteration = Array.isArray(schedule?.actions)
    ? schedule.actions.reduce((n, list) => n + (Array.isArray(list) ? list.length : 0), 0)
    : 0;
  if (perIteration * iterations > MAX_SIMULATED_EVENTS) {
    throw new RangeError(
      `iterations ${iterations} × ${perIteration} actions would simulate ${
        perIteration * iterations
      } events, over the limit of ${MAX_SIMULATED_EVENTS}`,
    );
  }
  const structure = checkStructure(schedule);
  if (structure.length > 0) throw structureError(structure);
  const costs = resolveCosts(options.costs, schedule.stageToRank.length);
  const dataParallel = checkDataParallel(options, schedule.stageToRank.length, iterations);
  const run = runSchedule(schedule, costs, comm, iterations);
  if (run.stalls.length > 0) throw new ScheduleDeadlockError(run.stalls);

  const p = schedule.ranks;
  const events: TimedEvent[] = [];
  const busy = new Array<number>(p).fill(0);
  const iterEnd = new Array<number>(iterations).fill(0);
  let makespan = 0;
  for (let r = 0; r < p; r++) {
    const list = schedule.actions[r];
    const L = list.length;
    const { starts, ends } = run;
    for (let i = 0; i < L * iterations; i++) {
      const it = Math.floor(i / L);
      const start = starts[r][i];
      const end = ends[r][i];
      busy[r] += end - start;
      if (end > makespan) makespan = end;
      if (end > iterEnd[it]) iterEnd[it] = end;
      events.push({ rank: r, action: list[i - it * L], iteration: it, start, end });
    }
  }
  events.sort((a, b) => a.start - b.start || a.rank - b.rank);
  let reduce: { allReduce: AllReduceSpan[] } | Record<string, never> = {};
  if (dataParallel !== null) {
    const spans = allReduceSpans(schedule, events, dataParallel);
    for (const s of spans) if (s.end > makespan) makespan = s.end;
    reduce = { allReduce: spans };
  }
  const totalBusy = busy.reduce((a, b) => a + b, 0);
  const bubble = (work: number, span: number) => span > 0 ? Math.max(0, 1 - work / (p * span)) : 0;
  let steady: { steadyStateBubble: number; period: number } | Record<string, never> = {};
  if (iterations > 1) {
    const period = iterEnd[iterations - 1] - iterEnd[iterations - 2];
    steady = { steadyStateBubble: bubble(totalBusy / iterations, period), period };
  }
  return {
    iterations,
    makespan,
    busy,
    idle: busy.map((b) => makespan - b),
    bubbleFraction: bubble(totalBusy, makespan),
    ...steady,
    peakActivations: peakActivations(schedule),
    events,
    ...reduce,
  };
}
