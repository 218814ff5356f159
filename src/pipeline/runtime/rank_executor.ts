/**
 * The interface behind which a rank's compute plugs into the runtime: the
 * runtime moves tensors between ranks and runs the schedule; a
 * {@linkcode RankExecutor} computes every action of the stages its rank
 * holds (one or more). The synthetic executor (fixed-time actions) and the
 * model's executor (layers and optimizer) both implement it.
 *
 * @module
 */

import type { Action } from "../schedule/action.ts";
import type { CommBackend } from "../comm/backend.ts";

/** Where an action runs and what it works on. */
export interface StageContext {
  /** Rank running the action. */
  readonly rank: number;
  /** The action (kind, global stage, micro-batch). */
  readonly action: Action;
  /** Training iteration (step) the action belongs to. */
  readonly iteration: number;
  /** Whether `action.stage` is the first stage (its forward input comes from the batch). */
  readonly isFirstStage: boolean;
  /** Whether `action.stage` is the last stage (its backward starts from the loss). */
  readonly isLastStage: boolean;
  /**
   * True in a forward-only run (prediction): no backward follows, so the
   * executor need not keep what backward would need.
   */
  readonly forwardOnly: boolean;
}

/**
 * An output whose data is still being produced (e.g. a GPU read-back, ~10 ms
 * in Deno): the runtime sends it when it resolves and meanwhile runs the
 * next action.
 */
export interface PendingOutput {
  /** Resolves to the output data. */
  readonly pending: PromiseLike<Float32Array>;
}

/**
 * What a forward or input-gradient pass hands to the neighbouring stage:
 * the data (given away: the runtime transfers its buffer, so the executor
 * must not touch the array afterwards), a pending read-back, or null where
 * nothing is sent (the last stage's forward, the first stage's backward).
 */
export type StageOutput = Float32Array | PendingOutput | null;

/**
 * The requests an executor answers outside runs (save, load, predict, …):
 * each method's argument and result types. A rank group's `call` is
 * checked against it by the compiler, and the executor's
 * {@linkcode RankExecutor.calls} implement it.
 */
export type CallMap = {
  readonly [method: string]: { readonly args: unknown; readonly result: unknown };
};

/** An executor that answers no requests. */
export type NoCalls = Record<never, never>;

/** The handlers of a {@linkcode CallMap}: one function per method. */
export type CallHandlers<C extends CallMap> = {
  readonly [K in keyof C]: (args: C[K]["args"]) => C[K]["result"] | Promise<C[K]["result"]>;
};

/**
 * A stage's own check of one step: whether its gradients and, on the last
 * stage, its losses were finite, and if not, what was not.
 */
export interface StepCheck {
  /** Whether every gradient (and loss) of the stage was finite. */
  readonly finite: boolean;
  /** What was not: the loss (last stage) or a gradient. */
  readonly what?: "loss" | "gradient";
  /** The first micro-batch whose loss was not finite, where known. */
  readonly microBatch?: number;
  /**
   * The stage's sum of squared gradients (f64) of the step, needed with
   * clipping by post-validation (`RankRunOptions.policy`).
   */
  readonly normSquared?: number;
}

/**
 * When a device ran one action's work, from the device's own timestamps
 * (ms, device clock), so that the event covers device execution exactly;
 * `hostMinusDevice()` turns them into host time (`performance.now()`), read
 * when the run ends (the estimate tightens as more timestamps come back).
 */
export interface DeviceSpan {
  /** When the device began the action's work. */
  readonly start: number;
  /** When it finished it. */
  readonly end: number;
  /** Host time minus device time, ms (best estimate so far). */
  hostMinusDevice(): number;
}

/** A check still being read back (e.g. from a GPU): the runtime publishes it when it resolves. */
export interface PendingCheck {
  /** Resolves to the stage's check. */
  readonly check: PromiseLike<StepCheck>;
}

/** What `step` may give back: nothing (no check: finite), a check, or a pending one. */
export type StepResultOf = void | StepCheck | PendingCheck;

/** What an executor learns about its place in the pipeline when it is created. */
export interface RankExecutorInit {
  /** This rank. */
  readonly rank: number;
  /** Number of ranks p. */
  readonly ranks: number;
  /** Global stages this rank holds, ascending (schedule placement). */
  readonly stages: readonly number[];
  /** Number of global stages (ranks · V). */
  readonly numStages: number;
  /** Micro-batches per iteration. */
  readonly microBatches: number;
  /** Executor-specific options, passed through from the pool (structured-cloned). */
  readonly options: unknown;
  /**
   * Shared flag (index 0) that turns nonzero when the run is aborted. An
   * executor that blocks its thread (`Atomics.wait`) should wait on it so an
   * abort wakes it: Deno cannot terminate a worker whose thread is blocked.
   */
  readonly abortFlag: Int32Array;
  /** Aborted when the run is aborted (seen between turns of the event loop). */
  readonly signal: AbortSignal;
  /**
   * This rank's transport, for collectives an executor may need (the
   * model's executor needs none: its global-norm clipping goes through the
   * runtime's `clipGradNorm`). The runtime's own traffic uses tags that
   * start with `act/`, `grad/` (see `makeTag`) and `verdict/`; use other
   * tags for anything else.
   */
  readonly comm: CommBackend;
}

/**
 * A rank's compute, for every stage the rank holds (each call names its
 * stage). Every method may be sync or async. The runtime times
 * each action from the call to the settlement of its result or, where the
 * executor has {@linkcode RankExecutor.deviceDone} and it gives a promise
 * (work still queued on a device, e.g. WebGPU, whose calls only record
 * commands), to the settlement of that promise: see `runRank` for the
 * definition of an event's start and end.
 *
 * Data flow: `forward` gets the previous stage's output (null on the first
 * stage) and returns its own (null or ignored on the last stage). `backward`
 * (B, full) and `backwardInput` (I) get the next stage's input gradient
 * (null on the last stage, which starts from its loss) and return the
 * gradient for the previous stage (null on the first stage).
 * `backwardWeight` (W) accumulates the weight gradients from what I kept.
 * `step(stage, iteration)` runs right after that stage's last backward of
 * the iteration, with no barrier across ranks.
 *
 * @example
 * ```ts
 * import type { StageContext, RankExecutor } from "@conveyor/core/runtime";
 * const identity: RankExecutor = {
 *   forward: (_ctx: StageContext, x) => x ?? new Float32Array(4),
 *   backward: (_ctx: StageContext, dy) => dy ?? new Float32Array(4),
 *   backwardInput: (_ctx: StageContext, dy) => dy ?? new Float32Array(4),
 *   backwardWeight: () => {},
 *   step: () => {},
 * };
 * console.log(typeof identity.forward); // "function"
 * ```
 */
export interface RankExecutor<C extends CallMap = NoCalls> {
  /** Called when the rank starts an iteration, with that rank's payload for it. */
  beginIteration?(iteration: number, payload: unknown): void | Promise<void>;
  /** F. */
  forward(ctx: StageContext, input: Float32Array | null): StageOutput | Promise<StageOutput>;
  /** B: input and weight gradients in one pass. */
  backward(ctx: StageContext, gradOutput: Float32Array | null): StageOutput | Promise<StageOutput>;
  /** I: input gradient only; keep what W needs. */
  backwardInput(
    ctx: StageContext,
    gradOutput: Float32Array | null,
  ): StageOutput | Promise<StageOutput>;
  /** W: weight gradient from what I kept. */
  backwardWeight(ctx: StageContext): void | Promise<void>;
  /**
   * Optimizer step of one stage, right after its last backward of
   * `iteration`. With step validation on (see `runRank`), it returns the
   * stage's {@linkcode StepCheck} (or a promise of it, e.g. a GPU read-back,
   * which the runtime does not wait for) and keeps what
   * {@linkcode RankExecutor.rollbackStep} needs until
   * {@linkcode RankExecutor.commitStep}; an executor without a check
   * returns nothing and counts as finite.
   */
  step(
    stage: number,
    iteration: number,
  ): StepResultOf | Promise<StepResultOf>;
  /**
   * Data parallelism: `stage`'s accumulated gradients of the iteration, one
   * array per parameter in the stage's parameter order (copies: the runtime
   * keeps them and writes the average into them). Called right before the stage's optimizer step, once
   * its last backward is done; {@linkcode RankExecutor.setGradients} then
   * gives the average across the replicas back.
   */
  gradients?(stage: number): Float32Array[] | Promise<Float32Array[]>;
  /**
   * Data parallelism: replaces `stage`'s accumulated gradients with `grads`
   * (the replicas' average, same order and sizes as `gradients` gave),
   * before the stage's optimizer step.
   */
  setGradients?(stage: number, grads: readonly Float32Array[]): void | Promise<void>;
  /**
   * ZeRO-1 (a sharded optimizer): this replica's share of `stage`'s
   * parameters after its step (or redo), as a flat vector: the values
   * `shardRange(N, replica, D)` of the stage's N parameter values in
   * parameter order. Called right after `step` and `redoStep`.
   */
  ownedParameters?(stage: number): Float32Array | Promise<Float32Array>;
  /**
   * ZeRO-1: writes all N values of `stage`'s parameters (flat, in
   * parameter order), gathered from every replica's share after the step.
   */
  setStageParameters?(stage: number, values: Float32Array): void | Promise<void>;
  /**
   * Parameters shared with another rank (tied embeddings): null (or
   * absent) where `stage` shares nothing across ranks, else a function the
   * runtime calls once the stage's last backward is done (and, with
   * replicas, its average is written back), which starts combining the
   * shared gradients with the other rank's copy; the stage steps once
   * `finish()` resolves, the rank going on with its other actions meanwhile.
   */
  tiedSync?(
    stage: number,
    iteration: number,
    attempt: number,
  ): (() => { readonly ready: boolean; finish(): Promise<void> }) | null;
  /**
   * Undoes the step of `stage` in `iteration` exactly: parameters and
   * optimizer state as they were before it (a stage that did not step
   * leaves them as they are). Called when some stage's check failed.
   */
  rollbackStep?(stage: number, iteration: number): void | Promise<void>;
  /** The step of `stage` in `iteration` is final: what a rollback would need can go. */
  commitStep?(stage: number, iteration: number): void | Promise<void>;
  /**
   * Clipping by post-validation (`RankRunOptions.policy`): undoes the
   * step of `stage` in `iteration` exactly, as `rollbackStep`, then steps
   * again with the gradients that step used times `scale`; the new step is
   * final. Needed with `clipGradNorm`, where `step` keeps a copy of its
   * gradients until `commitStep` or this.
   */
  redoStep?(stage: number, iteration: number, scale: number): void | Promise<void>;
  /**
   * Drops everything an abandoned attempt at `iteration` left behind (state
   * kept for backward, accumulated gradients, losses), before the runtime
   * runs the iteration again or stops.
   */
  abandonIteration?(iteration: number): void | Promise<void>;
  /**
   * Called right after each action (and each `step`) settles: a promise
   * that settles once the device has finished all the work recorded so far
   * (e.g. WebGPU: the device's timestamps around the action, read once a
   * later read-back has waited for the device anyway), or undefined where
   * that work is already done (CPU). The runtime does not wait for it
   * before the next action; it only dates the action's end by it, and
   * waits for them all at the end of the run, so it must settle after
   * `endIteration` at the latest. A rejection fails the run like an error
   * of the action.
   */
  deviceDone?(): PromiseLike<void | DeviceSpan> | undefined;
  /** Called when the rank ends an iteration; the (structured-cloneable) value is reported. */
  endIteration?(iteration: number): unknown;
  /** Requests from the rank group outside runs (save, load, predict, …), per {@linkcode CallMap}. */
  readonly calls?: CallHandlers<C>;
  /** Releases resources when the pool is disposed. */
  dispose?(): void | Promise<void>;
}

/**
 * What an executor module exports as `createRankExecutor` so that the
 * worker can build its rank's executor.
 */
export type RankExecutorFactory<C extends CallMap = NoCalls> = (
  init: RankExecutorInit,
) => RankExecutor<C> | Promise<RankExecutor<C>>;
