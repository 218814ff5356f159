/**
 * The action interpreter: runs one rank's action list over a
 * {@linkcode CommBackend} and a {@linkcode RankExecutor}. For each action
 * it receives the input, computes, hands the output to the neighbouring
 * stage without waiting for it, and steps a stage's optimizer right after
 * that stage's last backward (with data parallelism, once the stage's
 * gradient average is in, the rank going on with its other stages
 * meanwhile); it goes on to the next iteration with no barrier. Step post-validation (verdicts, settling, abandoned attempts)
 * lives in `step_validation.ts`, which the loop calls at named points. The
 * worker entry uses it per worker; every rank group runs it per rank.
 *
 * @module
 */

import type { Action } from "../schedule/action.ts";
import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import { CommAbortedError, type CommBackend } from "../comm/backend.ts";
import { makeTag, type TagSpace } from "./tag.ts";
import type { PendingOutput, RankExecutor, StageContext, StepResultOf } from "./rank_executor.ts";
import { Abandon, type GradNorm, type RolledBack, StepValidation } from "./step_validation.ts";
import { DeviceTimeline } from "./_device_timeline.ts";
import { Outbox } from "./_outbox.ts";
import { createEventLoopTurn } from "./_event_loop_turn.ts";
import { applyFault, checkFaultInjection } from "./fault_injection.ts";
import { checkRunPolicy, type RunPolicyOptions } from "./run_policy.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";
import type { GradientSync, PendingAverage } from "./gradient_sync.ts";
import { describeValue } from "../../text/describe.ts";

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
  readonly executor: RankExecutor;
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
   * The run's policy, checked here (see {@linkcode checkRunPolicy}; absent:
   * `nonFinite` `"off"`, no clipping, no fault). With `nonFinite` `"skip"`,
   * every stage publishes its step's `StepCheck`; a step that any stage
   * found non-finite is rolled back on every stage and, where the next
   * iteration had started on the stepped weights, that iteration runs again
   * on the restored ones, as a new attempt whose messages never meet the
   * abandoned one's. `"throw"` rolls back the same way and ends the run at
   * the bad step instead of going on. With `clipGradNorm`, each stage steps
   * at once, unclipped, and its step's check carries its sum of squared
   * gradients (`StepCheck.normSquared`), which goes to every rank with its
   * flag; once every flag of an iteration is in, every rank adds the sums in
   * stage order, and when the norm (their square root) is finite and above
   * `clipGradNorm`, every stage redoes its step with its gradients times
   * `clipGradNorm / (norm + 1e-6)` ({@linkcode RankExecutor.redoStep}) and
   * the next iteration, begun on the unclipped weights, runs again, as after
   * a rollback (with `nonFinite` `"off"`, the checks' finiteness is
   * ignored). `faultInjection` is applied before an action's compute.
   */
  readonly policy?: RunPolicyOptions;
  /**
   * Data parallelism: the average of this rank's stages' gradients across
   * the replicas (absent: one replica), started right after each stage's
   * last backward. The rank goes on with its other stages' actions while
   * it is under way; the stage steps before the first action after it is
   * complete, and at the latest before the iteration ends, stages stepping
   * in the order their last backwards ran. `comm` is then this replica's
   * view of the global transport.
   */
  readonly gradientSync?: GradientSync;
  /**
   * Told when the rank changes state; `index` is the action's position in
   * the schedule's list for this rank, `schedule.actions[rank]` (also in a
   * forward-only run), -1 before an iteration's first action, the list's
   * length when done. A stage's state is "step" from the moment it waits for
   * its gradient average (with replicas) to the end of its optimizer step.
   */
  readonly onState?: (state: RankState, index: number, iteration: number) => void;
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
  const { schedule, rank, comm } = options;
  // ZeRO-1: each step is followed by the all-gather of the replicas' shares.
  const sharding = options.gradientSync?.sharding ?? null;
  const executor = sharding === null ? options.executor : sharding.wrap(options.executor);
  const first = options.firstIteration ?? 0;
  const iterations = options.iterations ?? 1;
  checkRange(schedule, rank, first, iterations);
  const forwardOnly = options.forwardOnly === true;
  const list = forwardOnly
    ? schedule.actions[rank].filter((a) => a.kind === "F")
    : schedule.actions[rank];
  const where = schedule.stageToRank;
  const numStages = where.length;
  const policy = checkRunPolicy(options.policy);
  const fault = policy.faultInjection === undefined
    ? undefined
    : checkFaultInjection(policy.faultInjection);
  // Null where nothing is validated: then the loop never calls it.
  const validation = StepValidation.create({
    comm,
    executor,
    stageToRank: where,
    stages: [...new Set(list.map((a) => a.stage))].sort((x, y) => x - y),
    firstIteration: first,
    policy,
    forwardOnly,
  });
  const clock = options.clock ?? (() => performance.now());
  // `onState` gets the action's position in the schedule's list for this
  // rank (`schedule.actions[rank]`), in a forward-only run too.
  const full = schedule.actions[rank];
  const at = forwardOnly
    ? [...full.flatMap((a, j) => a.kind === "F" ? [j] : []), full.length]
    : null;
  const onState = (state: RankState, i: number, it: number) =>
    options.onState?.(state, i < 0 || at === null ? i : at[i], it);
  const abortFlag = options.abortFlag ?? new Int32Array(1);
  const lastBackward = lastBackwards(list);
  const timeline = new DeviceTimeline(rank, clock);
  const reports: unknown[] = [];
  const outbox = new Outbox(comm);

  const throwIfFailed = () => {
    const f = outbox.failure ?? timeline.failure;
    if (f !== null) throw rankError(rank, f.action, f.iteration, f.cause, false);
  };
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
  const tag = (space: TagSpace, stage: number, mb: number, it: number) =>
    makeTag({ space, microBatch: mb, stage, iteration: it, attempt: validation?.attempt(it) ?? 0 });
  const receive = (peer: number, tag: string, it: number) =>
    validation === null ? comm.recv(peer, tag) : validation.receive(comm.recv(peer, tag), it);

  // Action `a`, the `i`-th of the list, in iteration `it`, then, where `a`
  // is its stage's last backward, the stage's optimizer step (with
  // replicas: the start of its gradient average, the step coming later).
  const perform = async (a: Action, i: number, it: number): Promise<void> => {
    const { stage: s, microBatch: mb } = a;
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
          outbox.post(a, it, where[s + 1], tag("activation", s + 1, mb, it), out);
        }
      } else if (a.kind === "W") {
        onState("compute", i, it);
        await run(a, it, true, () => executor.backwardWeight(ctx));
      } else {
        const grad = s === numStages - 1
          ? null
          : await receive(where[s + 1], tag("gradient", s, mb, it), it);
        onState("compute", i, it);
        const work = a.kind === "B"
          ? () => executor.backward(ctx, grad)
          : () => executor.backwardInput(ctx, grad);
        const out = await run(a, it, true, work);
        if (s > 0) outbox.post(a, it, where[s - 1], tag("gradient", s - 1, mb, it), out);
      }
      if (!forwardOnly && lastBackward.get(s) === i) {
        inStep = true;
        // The previous step is final before this iteration's first step or average.
        if (validation?.mustSettleBefore(it)) await validation.beforeFirstStep(it);
        const attempt = validation?.attempt(it) ?? 0;
        const average = afterward(
          options.gradientSync?.start(s, it, attempt, executor) ?? null,
          executor.tiedSync?.(s, it, attempt) ?? null,
        );
        // With replicas (or tied copies) the step waits for them while the rank goes on.
        if (average) averaging.push({ a, i, it, average });
        else await step(a, i, it, null);
      }
    } catch (e) {
      throw rankError(rank, a, it, e, inStep);
    }
  };
  // The optimizer step of `a`'s stage once its gradients (`average`: their
  // average across the replicas) are final.
  const step = async (a: Action, i: number, it: number, average: PendingAverage | null) => {
    try {
      onState("step", i, it);
      await average?.finish();
      const out = await run(a, it, false, () => executor.step(a.stage, it));
      validation?.afterStep(a.stage, it, out as StepResultOf, (cause) => {
        timeline.failure ??= { action: a, iteration: it, cause };
      });
    } catch (e) {
      throw rankError(rank, a, it, e, true);
    }
  };
  // Steps waiting for their averages, in the order their stages finished:
  // taken before an action once complete, and all before the iteration ends.
  const averaging: { a: Action; i: number; it: number; average: PendingAverage }[] = [];
  const stepAveraged = async (all: boolean) => {
    while (averaging.length > 0 && (all || averaging[0].average.ready)) {
      const { a, i, it, average } = averaging.shift()!;
      await step(a, i, it, average);
    }
  };

  // One attempt at iteration `it`: every action of the list, in order.
  const runIteration = async (it: number): Promise<void> => {
    onState("idle", -1, it);
    // A redo's all-gather (an abandoned attempt's) is in before the stage runs again.
    await sharding?.settle();
    validation?.beginIteration(it);
    await executor.beginIteration?.(it, options.payloads?.[it - first]);
    for (let i = 0; i < list.length; i++) {
      await loop.turn();
      throwIfFailed();
      validation?.beforeAction(it);
      await stepAveraged(false);
      await perform(list[i], i, it);
    }
    await stepAveraged(true);
    await sharding?.settle();
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
        // The previous step was undone everywhere: this attempt goes and
        // the iteration runs again (or, with "stop", the run ends here).
        if (!(e instanceof Abandon) || validation === null) throw e;
        // Its averages: none had started (an attempt is abandoned before its first step).
        averaging.length = 0;
        if (await validation.abandon(it, e)) break;
      }
    }
    await outbox.drain();
    await timeline.settled();
    throwIfFailed();
    if (validation !== null) await validation.finish(it);
    await sharding?.settle();
  } finally {
    loop.close();
  }
  onState("done", list.length, first + iterations - 1);
  return {
    events: timeline.events,
    reports,
    rolledBack: validation?.rolledBack ?? [],
    gradNorms: validation?.gradNorms ?? [],
  };
}

// `first` (a replicas' average), then what `next` starts once it is
// written back (tied copies' sum), as one pending; either may be null.
function afterward(
  first: PendingAverage | null,
  next: (() => PendingAverage) | null,
): PendingAverage | null {
  if (next === null) return first;
  if (first === null) return next();
  let ready = false;
  const done = (async () => {
    await first.finish();
    await next().finish();
  })().finally(() => ready = true);
  done.catch(() => {}); // seen by finish(); an abandoned attempt never calls it
  return {
    get ready() {
      return ready;
    },
    finish: () => done,
  };
}

// Each stage's last backward: its position in the list.
function lastBackwards(list: readonly Action[]): Map<number, number> {
  const last = new Map<number, number>();
  list.forEach((a, i) => {
    if (a.kind !== "F") last.set(a.stage, i);
  });
  return last;
}

function checkRange(schedule: Schedule, rank: number, first: number, iterations: number): void {
  if (!Number.isInteger(first) || first < 0) {
    throw new RangeError(
      `firstIteration must be a non-negative integer, got ${describeValue(first)}`,
    );
  }
  if (!Number.isInteger(iterations) || iterations < 1) {
    throw new RangeError(`iterations must be a positive integer, got ${describeValue(iterations)}`);
  }
  if (!Number.isInteger(rank) || rank < 0 || rank >= schedule.ranks) {
    throw new RangeError(`rank must be in [0, ${schedule.ranks - 1}], got ${describeValue(rank)}`);
  }
}

// What a failure of action `a` in `iteration` comes out as (`step`: it came
// from the optimizer step after `a`): a transport abort, an error already
// named or an abandoned attempt as it is; anything else as a
// PipelineRankError naming the rank and action.
function rankError(
  rank: number,
  a: Action,
  iteration: number,
  cause: unknown,
  step: boolean,
): unknown {
  if (cause instanceof CommAbortedError || cause instanceof PipelineRankError) return cause;
  if (cause instanceof Abandon) return cause;
  const message = cause instanceof Error ? cause.message : String(cause);
  const detail = step && !message.includes("optimizer step")
    ? `in the optimizer step of stage ${a.stage}: ${message}`
    : message;
  return new PipelineRankError({
    rank,
    kind: "error",
    action: a,
    iteration,
    detail,
    ...(step ? { between: true } : {}),
  });
}
