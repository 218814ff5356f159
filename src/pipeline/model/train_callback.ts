/**
 * What `PipelineParallelModel.train` calls back: `onStep` and a list of
 * {@linkcode TrainCallback}s (the shape of tfjs's callbacks: begin, each
 * step's end, end), and what it tells them.
 *
 * **Exact steps.** A hook that uses the model or reads the data's state at
 * step k must run with the model standing exactly after step k and no
 * batch after k pulled from the source. `train` makes that so at every step
 * for `onStep`, and at every step a callback names with `every` (and at
 * every validation step): a window of steps run together always ends
 * there, and the next window's batches are pulled only after the hooks of
 * that step have returned. At the other steps a callback sees the step's
 * result after its window has run; if it then calls the model while the
 * model stands after a later step, the call is refused naming both steps
 * (never a silent answer about a later model).
 *
 * @module
 */

import type { TrainingBatch } from "./batch.ts";
import type { EvaluateResult, StepResult, TrainResult } from "./results.ts";

/**
 * The model's weights as a callback may keep and put back (`EarlyStopping`'s
 * `restoreBest`): the model's own `saveSafetensors` and `loadSafetensors`.
 */
export interface TrainWeights {
  /** All stages' weights as one safetensors file (the model must stand exactly after a step). */
  save(): Promise<Uint8Array>;
  /** Loads weights that `save` gave into every stage (from a hook or `onTrainEnd`). */
  load(bytes: Uint8Array): Promise<void>;
}

/** What {@linkcode TrainCallback.onTrainBegin} is told, before any batch is pulled. */
export interface TrainBeginInfo {
  /** The model's step count at the call's start: the index of the call's first step. */
  readonly firstStep: number;
  /** The call's number of steps when known (an array's length), else undefined. */
  readonly steps?: number;
  /**
   * Under MPI, this process's rank (callbacks that write files or print do
   * it on rank 0 only); null where this process runs every rank.
   */
  readonly localRank: number | null;
  /** `train`'s `validation.every`, when a validation batch is given. */
  readonly validationEvery?: number;
  /** The model's weights, to keep and put back (given by the model's `train`). */
  readonly weights?: TrainWeights;
}

/** What a step's hooks are told beside the step's result. */
export interface StepContext {
  /**
   * The validation loss (and accuracy) after this step, at the steps of
   * `train`'s `validation.every`; undefined at the others.
   */
  readonly validation?: EvaluateResult;
  /**
   * Whether the model stands exactly after this step and no later batch has
   * been pulled (always true for `onStep` and at a callback's `every`
   * steps).
   */
  readonly exact: boolean;
  /**
   * Asks `train` to stop: no step after this step's window runs (at an
   * exact step, no step after this one), and `train` resolves with
   * `stopped` set to `reason`. The first request wins.
   */
  stop(reason: string): void;
}

/**
 * A reusable piece of a training loop (progress bar, logger, early
 * stopping, checkpoints…) for `train`'s `callbacks` list. Every method is
 * optional and may be async (`train` awaits it); a throw stops `train` and
 * is rethrown, and the model stays usable. Callbacks run in list order,
 * after `onStep`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import type { TrainCallback } from "@conveyor/core";
 * const losses: number[] = [];
 * const record: TrainCallback = { onStepEnd: (s) => void losses.push(s.loss) };
 * record.onStepEnd!({ step: 0, loss: 2.5 } as never, { exact: true, stop: () => {} });
 * assert.deepEqual(losses, [2.5]);
 * ```
 */
export interface TrainCallback {
  /**
   * A positive integer: the callback uses the model (or the data's state)
   * after every step whose count is a multiple of `every` (`step + 1`, so
   * `every: 20` is after the 20th, 40th… step over the model's life), and
   * `train` makes those steps exact (a window of steps always ends there and
   * no later batch is pulled before the hooks return). Without
   * it the callback sees each step's result only.
   */
  readonly every?: number;
  /** Called once before the first batch is pulled (check output paths here). */
  onTrainBegin?(info: TrainBeginInfo): void | Promise<void>;
  /** Called with each step's result, in step order. */
  onStepEnd?(step: StepResult, context: StepContext): void | Promise<void>;
  /** Called once when `train` ends without an error (also when aborted or stopped). */
  onTrainEnd?(result: TrainResult): void | Promise<void>;
}

/** `train`'s `validation` option: a batch evaluated after every `every`-th step. */
export interface ValidationOptions {
  /** The batch `evaluate` runs on (checked before the first step). */
  readonly batch: TrainingBatch;
  /**
   * A positive integer: evaluated after every step whose count (`step + 1`)
   * is a multiple of it; those steps are exact.
   */
  readonly every: number;
}
