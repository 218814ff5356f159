/**
 * Runs one rank's action list over a {@linkcode CommBackend} and a
 * {@linkcode StageExecutor}: receives each action's input, computes, hands
 * the output to the neighbouring stage without waiting for it, steps each
 * stage's optimizer right after that stage's last backward, and goes on to
 * the next iteration with no barrier. The worker entry uses it per worker;
 * every rank group (in-process, workers) runs it per rank.
 *
 * @module
 */

import { type Action, formatAction } from "../schedule/action.ts";
import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import { CommAbortedError, type CommBackend } from "../comm/backend.ts";
import { makeTag } from "../comm/tag.ts";
import type { PendingOutput, StageContext, StageExecutor, StageOutput } from "./stage_executor.ts";
import { type DeviceFailure, DeviceTimeline } from "./_device_timeline.ts";
import { createEventLoopTurn } from "./_event_loop_turn.ts";
import { applyFault, type CheckedFault } from "./fault_injection.ts";
import { PipelineWorkerError } from "./pipeline_worker_error.ts";

/** What a rank is doing, as reported to `onState`. */
export type RankState = "idle" | "recv" | "compute" | "step" | "done";

/** Options of {@linkcode runRank}. */
export interface RankRunOptions {
  /** The schedule (validated by the caller). */
  readonly schedule: Schedule;
  /** The rank to run. */
  readonly rank: number;
  /** Transport to the other ranks. */
  readonly comm: CommBackend;
  /** This rank's compute. */
  readonly executor: StageExecutor;
  /** Index of the first iteration (tags and contexts carry it; default 0). */
  readonly firstIteration?: number;
  /** Iterations to run back to back (default 1). */
  readonly iterations?: number;
  /** Payload per iteration for `executor.beginIteration` (index 0 = first iteration). */
  readonly payloads?: readonly unknown[];
  /** Time source for the events (default `performance.now`). */
  readonly clock?: () => number;
  /**
   * Run only the forward actions, in list order, and no optimizer step
   * (prediction). Dropping the backward actions cannot deadlock: forwards
   * never wait on a backward.
   */
  readonly forwardOnly?: boolean;
  /** A fault to inject before an action's compute (tests; see `checkFaultInjection`). */
  readonly fault?: CheckedFault;
  /** The run's abort flag (index 0 turns nonzero on abort): wakes a "block" fault. */
  readonly abortFlag?: Int32Array;
  /** Told when the rank changes state; `index` is the action's position in the rank's list. */
  readonly onState?: (state: RankState, index: number, iteration: number) => void;
}

/** What {@linkcode runRank} returns. */
export interface RankRunResult {
  /** Every action run, in list order, timed per `clock` as {@linkcode runRank} defines. */
  readonly events: TimedEvent[];
  /** `executor.endIteration`'s value per iteration (undefined where it has none). */
  readonly reports: unknown[];
}

/**
 * Runs `rank`'s list of the schedule for the given iterations.
 *
 * Hand-over: an output the executor returns as a ready array is posted to
 * its neighbour before the next action starts; a pending one (a GPU
 * read-back) is posted as soon as it resolves, while the rank goes on with
 * its next actions. Before each action the rank lets its event loop turn
 * once (a few microseconds), so that outputs settled in promise chains go
 * out, arrived messages come in and an abort is seen even when every
 * action computes synchronously.
 *
 * Event times: an action's work is done when its call settles or, where
 * `executor.deviceDone()` gives a promise after it (queued device work, as
 * on WebGPU, whose calls only record commands), when that promise settles
 * or, earlier, when the action's pending output has been read back (the
 * read-back follows the action's kernels in the device's queue). The rank's
 * device runs its work in order, so an action's work cannot begin before
 * the previous action's (or optimizer step's) work ended: an event starts at
 * max(call, end of the rank's previous device work) and ends when its work
 * is done (never before it starts). On the CPU that is the call and its
 * return. The next action is called at once, not when the device is done,
 * so recording and read-backs still overlap the device's work; an end is
 * seen when the event loop gets to it (Deno polls WebGPU completion about
 * every 10 ms), so it is an upper bound by that much.
 *
 * Errors of the executor (or of a send it fed) come out as a
 * {@linkcode PipelineWorkerError} naming the rank and action; an abort of
 * the transport comes out as the transport's `CommAbortedError`.
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core";
 * import { InProcessBackend, runRank } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * const schedule = generateSchedule("1f1b", { ranks: 1, microBatches: 2 });
 * const [comm] = InProcessBackend.createGroup(1);
 * const executor = createSyntheticExecutor({
 *   rank: 0, ranks: 1, stages: [0], numStages: 1, microBatches: 2, options: { ms: 0 },
 *   abortFlag: new Int32Array(1), signal: new AbortController().signal, comm,
 * });
 * const { events } = await runRank({ schedule, rank: 0, comm, executor });
 * console.log(events.map((e) => `${e.action.kind}${e.action.microBatch}`).join(" ")); // "F0 B0 F1 B1"
 * comm.close();
 * ```
 */
export async function runRank(options: RankRunOptions): Promise<RankRunResult> {
  const { schedule, rank, comm, executor } = options;
  const first = options.firstIteration ?? 0;
  const iterations = options.iterations ?? 1;
  if (!Number.isInteger(first) || first < 0) {
    throw new RangeError(`firstIteration must be a non-negative integer, got ${first}`);
  }
  if (!Number.isInteger(iterations) || iterations < 1) {
    throw new RangeError(`iterations must be a positive integer, got ${iterations}`);
  }
  if (!Number.isInteger(rank) || rank < 0 || rank >= schedule.ranks) {
    throw new RangeError(`rank must be in [0, ${schedule.ranks - 1}], got ${rank}`);
  }
  const clock = options.clock ?? (() => performance.now());
  const onState = options.onState ?? (() => {});
  const forwardOnly = options.forwardOnly === true;
  const list = forwardOnly
    ? schedule.actions[rank].filter((a) => a.kind === "F")
    : schedule.actions[rank];
  const where = schedule.stageToRank;
  const numStages = where.length;
  const lastBackward = new Map<number, number>();
  list.forEach((a, i) => {
    if (a.kind !== "F") lastBackward.set(a.stage, i);
  });

  const timeline = new DeviceTimeline(rank, clock);
  const reports: unknown[] = [];
  const sends = new Set<Promise<void>>();
  let sendFailure: DeviceFailure | null = null;
  const fail = (a: Action, iteration: number, cause: unknown): never => {
    if (cause instanceof CommAbortedError || cause instanceof PipelineWorkerError) throw cause;
    const detail = cause instanceof Error ? cause.message : String(cause);
    throw new PipelineWorkerError({ rank, kind: "error", action: a, iteration, detail });
  };
  const throwIfFailed = () => {
    const f = sendFailure ?? timeline.failure;
    if (f !== null) fail(f.action, f.iteration, f.cause);
  };
  // Runs one piece of work (an action when `event`, else an optimizer step) and dates it.
  const abortFlag = options.abortFlag ?? new Int32Array(1);
  const run = async <T>(a: Action, it: number, event: boolean, work: () => T | Promise<T>) => {
    if (event) {
      const hang = applyFault(options.fault, a, it, abortFlag);
      if (hang !== undefined) await hang;
    }
    const start = clock();
    const out = await work();
    const pending = out !== null && typeof out === "object" && "pending" in out
      ? (out as PendingOutput).pending
      : undefined;
    timeline.add(a, it, start, clock(), event, executor.deviceDone?.(), pending);
    return out;
  };
  // Hands `out` to `peer`: a ready array is posted before this returns.
  const handOver = (a: Action, it: number, peer: number, tag: string, out: StageOutput) => {
    if (out === null || out === undefined) {
      fail(a, it, new TypeError(`${formatAction(a)} returned no output for rank ${peer}`));
    }
    const data = out instanceof Float32Array ? out : (out as PendingOutput).pending;
    const p: Promise<void> = comm.send(peer, tag, data, { transfer: true }).catch((cause) => {
      sendFailure ??= { action: a, iteration: it, cause };
    }).finally(() => sends.delete(p));
    sends.add(p);
  };
  const tag = (space: "activation" | "gradient", chunk: number, mb: number, it: number) =>
    makeTag({ space, microBatch: mb, chunk, iteration: it });

  const loop = createEventLoopTurn();
  try {
    for (let it = first; it < first + iterations; it++) {
      onState("idle", -1, it);
      await executor.beginIteration?.(it, options.payloads?.[it - first]);
      for (let i = 0; i < list.length; i++) {
        await loop.turn();
        throwIfFailed();
        const a = list[i];
        const s = a.stage;
        const mb = a.microBatch;
        const ctx: StageContext = {
          rank,
          action: a,
          iteration: it,
          isFirstStage: s === 0,
          isLastStage: s === numStages - 1,
          forwardOnly,
        };
        try {
          onState("recv", i, it);
          if (a.kind === "F") {
            const input = s === 0
              ? null
              : await comm.recv(where[s - 1], tag("activation", s, mb, it));
            onState("compute", i, it);
            const out = await run(a, it, true, () => executor.forward(ctx, input));
            if (s < numStages - 1) {
              handOver(a, it, where[s + 1], tag("activation", s + 1, mb, it), out);
            }
          } else if (a.kind === "W") {
            onState("compute", i, it);
            await run(a, it, true, () => executor.backwardWeight(ctx));
          } else {
            const grad = s === numStages - 1
              ? null
              : await comm.recv(where[s + 1], tag("gradient", s, mb, it));
            onState("compute", i, it);
            const out = await run(
              a,
              it,
              true,
              () =>
                a.kind === "B" ? executor.backward(ctx, grad) : executor.backwardInput(ctx, grad),
            );
            if (s > 0) handOver(a, it, where[s - 1], tag("gradient", s - 1, mb, it), out);
          }
          if (!forwardOnly && lastBackward.get(s) === i) {
            onState("step", i, it);
            await run(a, it, false, () => executor.step(s, it));
          }
        } catch (e) {
          fail(a, it, e);
        }
      }
      reports.push(await executor.endIteration?.(it));
    }
    while (sends.size > 0) await Promise.all([...sends]);
    await timeline.settled();
    throwIfFailed();
  } finally {
    loop.close();
  }
  onState("done", list.length, first + iterations - 1);
  return { events: timeline.events, reports };
}
