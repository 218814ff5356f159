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
import type {
  PendingOutput,
  StageContext,
  StageExecutor,
  StageOutput,
  StepCheck,
  StepResultOf,
} from "./stage_executor.ts";
import { Abandon, isClip, type Verdict, VerdictBoard } from "./_verdicts.ts";
import { type DeviceFailure, DeviceTimeline } from "./_device_timeline.ts";
import { createEventLoopTurn } from "./_event_loop_turn.ts";
import { applyFault, checkFaultInjection } from "./fault_injection.ts";
import { checkRunPolicy, type RunPolicyOptions } from "./run_policy.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";

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
  /** The run's abort flag (index 0 turns nonzero on abort): wakes a "block" fault. */
  readonly abortFlag?: Int32Array;
  /**
   * The run's policy, checked (see {@linkcode checkRunPolicy}; absent:
   * `nonFinite` `"off"`, no clipping, no fault). With `nonFinite` `"skip"`,
   * every stage publishes its step's {@linkcode StepCheck}; a step that any
   * stage found non-finite is rolled back on every stage and, where the
   * next iteration had started on the stepped weights, that iteration runs
   * again on the restored ones (see the module documentation of the
   * verdicts). `"throw"` rolls back the same way and ends the run at the
   * bad step instead of going on. With `clipGradNorm`, each stage steps at
   * once, unclipped, and its step's check carries its sum of squared
   * gradients (`StepCheck.normSquared`), which goes to every rank with its
   * flag; once every flag of an iteration is in, every rank adds the sums in
   * stage order, and when the norm (their square root) is finite and above
   * `clipGradNorm`, every stage redoes its step with its gradients times
   * `clipGradNorm / (norm + 1e-6)` ({@linkcode StageExecutor.redoStep}) and
   * the next iteration, begun on the unclipped weights, runs again, as after
   * a rollback (with `nonFinite` `"off"`, the checks' finiteness is
   * ignored). `faultInjection` is applied before an action's compute.
   */
  readonly policy?: RunPolicyOptions;
  /** Told when the rank changes state; `index` is the action's position in the rank's list. */
  readonly onState?: (state: RankState, index: number, iteration: number) => void;
}

/** A step rolled back by post-validation. */
export interface RolledBack {
  /** The iteration whose steps were undone. */
  readonly iteration: number;
  /** The lowest stage whose check failed. */
  readonly stage: number;
  /** What that stage found not finite, where it said. */
  readonly what?: "loss" | "gradient";
  /** The first micro-batch whose loss was not finite, where known. */
  readonly microBatch?: number;
}

/** What {@linkcode runRank} returns. */
export interface RankRunResult {
  /** Every action run, in list order, timed per `clock` as {@linkcode runRank} defines. */
  readonly events: TimedEvent[];
  /**
   * `executor.endIteration`'s value per iteration (undefined where it has
   * none); a replayed iteration reports once, from its last attempt.
   */
  readonly reports: unknown[];
  /** The iterations whose steps post-validation rolled back (empty when it is off). */
  readonly rolledBack: RolledBack[];
  /** With `clipGradNorm`: each settled iteration's global gradient norm (empty without). */
  readonly gradNorms: GradNorm[];
}

/** An iteration's global gradient norm, as clipping by post-validation found it. */
export interface GradNorm {
  /** The iteration. */
  readonly iteration: number;
  /** The global gradient norm before clipping (NaN or ∞ where not finite). */
  readonly norm: number;
  /** Whether the steps were redone clipped. */
  readonly clipped: boolean;
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
 * so recording still overlaps the device's work; an end seen through a
 * promise (not a device span) is an upper bound by the event loop's delay.
 *
 * Errors of the executor (or of a send it fed) come out as a
 * {@linkcode PipelineRankError} naming the rank and action; an abort of
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
  const policy = checkRunPolicy(options.policy);
  const validate = policy.nonFinite;
  const clipNorm = policy.clipGradNorm;
  const fault = policy.faultInjection === undefined
    ? undefined
    : checkFaultInjection(policy.faultInjection);
  if (clipNorm !== undefined && typeof options.executor.redoStep !== "function") {
    throw new TypeError(
      `clipGradNorm needs an executor with redoStep, got ${typeof options.executor.redoStep}`,
    );
  }
  const clock = options.clock ?? (() => performance.now());
  const onState = options.onState ?? (() => {});
  const forwardOnly = options.forwardOnly === true;
  const checking = (validate !== "off" || clipNorm !== undefined) && !forwardOnly;
  const list = forwardOnly
    ? schedule.actions[rank].filter((a) => a.kind === "F")
    : schedule.actions[rank];
  const where = schedule.stageToRank;
  const numStages = where.length;
  const myStages = [...new Set(list.map((a) => a.stage))].sort((x, y) => x - y);
  const lastBackward = new Map<number, number>();
  list.forEach((a, i) => {
    if (a.kind !== "F") lastBackward.set(a.stage, i);
  });

  const timeline = new DeviceTimeline(rank, clock);
  const reports: unknown[] = [];
  const rolledBack: RolledBack[] = [];
  const gradNorms: GradNorm[] = [];
  const sends = new Set<Promise<void>>();
  let sendFailure: DeviceFailure | null = null;
  const board = checking ? new VerdictBoard(comm, where, clipNorm) : null;
  const attempts = new Map<number, number>();
  // The last iteration whose verdict was acted upon (its steps committed or rolled back).
  let settledUpTo = first - 1;
  // `step`: the failure came from the optimizer step after action `a`.
  const fail = (a: Action, iteration: number, cause: unknown, step = false): never => {
    if (cause instanceof CommAbortedError || cause instanceof PipelineRankError) throw cause;
    if (cause instanceof Abandon) throw cause;
    const message = cause instanceof Error ? cause.message : String(cause);
    const detail = step && !message.includes("optimizer step")
      ? `in the optimizer step of stage ${a.stage}: ${message}`
      : message;
    throw new PipelineRankError({
      rank,
      kind: "error",
      action: a,
      iteration,
      detail,
      ...(step ? { between: true } : {}),
    });
  };
  const throwIfFailed = () => {
    const f = sendFailure ?? timeline.failure;
    if (f !== null) fail(f.action, f.iteration, f.cause);
  };
  const abortFlag = options.abortFlag ?? new Int32Array(1);
  // Runs one piece of work (an action when `event`, else an optimizer step) and dates it.
  const run = async <T>(a: Action, it: number, event: boolean, work: () => T | Promise<T>) => {
    const hang = applyFault(fault, a, it, abortFlag, !event);
    if (hang !== undefined) await hang;
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
    makeTag({ space, microBatch: mb, chunk, iteration: it, attempt: attempts.get(it) ?? 0 });
  // A receive that gives up when the previous iteration's verdict turns bad.
  const receive = (peer: number, tag: string, it: number): Promise<Float32Array> => {
    const data = comm.recv(peer, tag);
    if (board === null || it - 1 <= settledUpTo) return data;
    return Promise.race([
      data,
      board.whenBad(it - 1).then((v) => Promise.reject(new Abandon(v))),
    ]);
  };
  // Publishes a stage's check when it is known (a pending one when it resolves).
  const publish = (stage: number, it: number, out: StepResultOf) => {
    if (board === null) return;
    const check = out !== undefined && out !== null && "check" in out
      ? Promise.resolve(out.check)
      : Promise.resolve((out ?? { finite: true }) as StepCheck);
    const failed = (cause: unknown) =>
      timeline.failure ??= { action: list[lastBackward.get(stage)!], iteration: it, cause };
    check.then((c) => {
      if (clipNorm !== undefined && typeof c.normSquared !== "number") {
        return failed(
          new TypeError(
            `clipGradNorm needs the step's check to carry normSquared, got ${
              String(c.normSquared)
            }`,
          ),
        );
      }
      // Without validation only the sum of squares counts.
      board.publish(
        it,
        stage,
        validate === "off" ? { finite: true, normSquared: c.normSquared } : c,
      );
    }, failed);
  };
  // Settles iteration `k`'s steps once its verdict is in: commit, redo
  // clipped, or roll back.
  const settle = async (k: number): Promise<Verdict | null> => {
    const v = await board!.verdict(k);
    let bad = v === null || isClip(v) ? null : v;
    for (const s of myStages) {
      if (v === null) await executor.commitStep?.(s, k);
      else if (isClip(v)) await executor.redoStep!(s, k, v.scale);
      else await executor.rollbackStep?.(s, k);
    }
    // Where it appeared, from every stage's flag (all come: each stage of k has stepped).
    if (bad !== null) bad = await board!.complete(k) ?? bad;
    if (bad !== null) {
      rolledBack.push({
        iteration: k,
        stage: bad.stage,
        ...(bad.what === undefined ? {} : { what: bad.what }),
        ...(bad.microBatch === undefined ? {} : { microBatch: bad.microBatch }),
      });
    }
    if (clipNorm !== undefined) {
      // Every flag of k is in (a bad verdict waited for them all above).
      const norm = board!.norm(k) ?? NaN;
      gradNorms.push({ iteration: k, norm, clipped: v !== null && isClip(v) });
    }
    settledUpTo = k;
    board!.forgetBefore(k);
    return bad ?? v;
  };

  // One attempt at iteration `it`; throws Abandon when the verdict of
  // it − 1 undoes its steps (a rollback or a clipped redo) before this
  // rank's first step of `it`.
  const runIteration = async (it: number): Promise<void> => {
    onState("idle", -1, it);
    board?.listen(it);
    await executor.beginIteration?.(it, options.payloads?.[it - first]);
    let stepped = false;
    for (let i = 0; i < list.length; i++) {
      await loop.turn();
      throwIfFailed();
      if (board !== null && it - 1 > settledUpTo) {
        const bad = board.badSoFar(it - 1);
        if (bad !== null) throw new Abandon(bad);
      }
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
      let inStep = false;
      try {
        onState("recv", i, it);
        if (a.kind === "F") {
          const input = s === 0
            ? null
            : await receive(where[s - 1], tag("activation", s, mb, it), it);
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
            : await receive(where[s + 1], tag("gradient", s, mb, it), it);
          onState("compute", i, it);
          const out = await run(
            a,
            it,
            true,
            () => a.kind === "B" ? executor.backward(ctx, grad) : executor.backwardInput(ctx, grad),
          );
          if (s > 0) handOver(a, it, where[s - 1], tag("gradient", s - 1, mb, it), out);
        }
        if (!forwardOnly && lastBackward.get(s) === i) {
          // Before the first step of `it`, the previous step must be final.
          if (board !== null && it - 1 > settledUpTo && !stepped) {
            const v = await settle(it - 1);
            if (v !== null) throw new Abandon(v);
          }
          stepped = true;
          inStep = true;
          onState("step", i, it);
          const out = await run(a, it, false, () => executor.step(s, it));
          publish(s, it, out as StepResultOf);
        }
      } catch (e) {
        fail(a, it, e, inStep);
      }
    }
    reports.push(await executor.endIteration?.(it));
  };

  const loop = createEventLoopTurn();
  try {
    let it = first;
    while (it < first + iterations) {
      try {
        await runIteration(it);
        it++;
      } catch (e) {
        if (!(e instanceof Abandon)) throw e;
        // The previous step was bad: it is rolled back everywhere; this
        // attempt's traffic and state go, and the iteration runs again on
        // the restored weights (or, with "throw", the run ends here).
        if (settledUpTo < it - 1) await settle(it - 1);
        const attempt = attempts.get(it) ?? 0;
        const prefix = [
          `act/i${it}${attempt === 0 ? "" : `a${attempt}`}/`,
          `grad/i${it}${attempt === 0 ? "" : `a${attempt}`}/`,
        ];
        comm.discard((t) => prefix.some((x) => t.startsWith(x)));
        await executor.abandonIteration?.(it);
        if (validate === "throw" && !isClip(e.verdict)) {
          comm.discard((t) => t.startsWith(`verdict/i${it}/`));
          break;
        }
        attempts.set(it, attempt + 1);
      }
    }
    while (sends.size > 0) await Promise.all([...sends]);
    await timeline.settled();
    throwIfFailed();
    // The run's last step is final only once its verdict is in.
    if (board !== null && settledUpTo < it - 1) await settle(it - 1);
  } finally {
    loop.close();
  }
  onState("done", list.length, first + iterations - 1);
  return { events: timeline.events, reports, rolledBack, gradNorms };
}
