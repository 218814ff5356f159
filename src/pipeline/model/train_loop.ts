/**
 * `PipelineParallelModel.train`'s loop: batches from an array, an iterable
 * or an `AsyncIterable`, run in windows of consecutive steps (one rank-group
 * run each: the steps of a window interlock, each rank going on to the next
 * step right after its own last action), `onStep` after each window for each
 * of its steps, and an `AbortSignal` seen between windows.
 *
 * **Windows.** An array runs as one window by default (every step
 * interlocks, as before). An iterable or async iterable runs in windows of
 * {@linkcode DEFAULT_STREAM_WINDOW} steps: the batches of a window are
 * pulled as it starts (an async source's next window is pulled while the
 * current one runs, so at most one window is pulled ahead). The trade-off
 * of `window`: larger windows interlock more steps (a window boundary costs
 * one pipeline fill and drain) and pay fewer round trips; smaller ones give
 * `onStep` sooner, stop sooner on `signal` and hold fewer batches. With
 * `window: 1` every step is its own run: `onStep` and `signal` act at every
 * step boundary.
 *
 * @module
 */

import type { RankGroupRunResult } from "../runtime/rank_group.ts";
import type { ModelStagePayload } from "./model_stage_executor.ts";
import type { TrainingBatch } from "./batch.ts";
import {
  NonFiniteStepError,
  type StepResult,
  stepResults,
  type TrainResult,
  trainResult,
} from "./results.ts";

/**
 * Steps per rank-group run when `train`'s batches come from an (async)
 * iterable and `window` is not given.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { DEFAULT_STREAM_WINDOW } from "@conveyor/core";
 * assert.equal(DEFAULT_STREAM_WINDOW, 4);
 * ```
 */
export const DEFAULT_STREAM_WINDOW = 4;

/** Batches for `train`: an array, an iterable or an async iterable (pulled as needed). */
/**
 * Batches for `train`: an array, an iterable or an async iterable. Under MPI
 * a process other than rank 0 may give null for every batch (rank 0 sends
 * it what its rank needs).
 */
export type BatchSource =
  | readonly (TrainingBatch | null)[]
  | Iterable<TrainingBatch | null>
  | AsyncIterable<TrainingBatch | null>;

/** Options of `PipelineParallelModel.train`. */
export interface TrainOptions {
  /**
   * Called with each step's result, in step order, once the window holding
   * the step has ended (and awaited). The model may be used from it
   * (evaluate, checkpoint, setLearningRate, loadSafetensors; not
   * loadCheckpoint, which would move the step count under the running
   * call): it then stands after the window's last step, which is this step
   * when it ends a window. Outside `onStep` the calls that change the model
   * are refused while `train` runs. A throw stops `train` and is rethrown;
   * the model stays usable.
   */
  readonly onStep?: (step: StepResult) => void | Promise<void>;
  /**
   * Stops the call after the window that runs when it aborts (no window
   * starts once it has aborted): `train` resolves with the steps done and
   * `aborted: true`, and the model stays usable. Batches an async source
   * gave for the next window are dropped.
   */
  readonly signal?: AbortSignal;
  /**
   * Steps per rank-group run (positive integer; default: all of an array,
   * {@linkcode DEFAULT_STREAM_WINDOW} for iterables). See the module
   * documentation for the trade-off.
   */
  readonly window?: number;
}

/** What the loop needs of the model. */
export interface TrainLoopHost {
  /** Checks batch `index` (named `where`) and splits it into each rank's payload. */
  /** Splits the call's `index`-th batch (`where` names it in errors). */
  split(batch: TrainingBatch | null, where: string, index: number): ModelStagePayload[] | null;
  /** Runs one window (exclusively; a failed run closes the model) and advances the step count. */
  run(
    plans: readonly (ModelStagePayload[] | null)[],
  ): Promise<{ run: RankGroupRunResult; first: number }>;
  /** What a non-finite step does: "throw" stops `train` with a NonFiniteStepError. */
  readonly nonFinite: "skip" | "throw" | "off";
  /** Ranks p. */
  readonly ranks: number;
  /** The rank of the last stage. */
  readonly lastRank: number;
}

function checkOptions(o: TrainOptions | undefined): TrainOptions {
  if (o === undefined) return {};
  if (o === null || typeof o !== "object") {
    throw new TypeError(`train options must be an object { onStep, signal, window }, got ${o}`);
  }
  if (o.onStep !== undefined && typeof o.onStep !== "function") {
    throw new TypeError(`onStep must be a function (step) => void, got ${typeof o.onStep}`);
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new TypeError(`signal must be an AbortSignal, got ${String(o.signal)}`);
  }
  if (o.window !== undefined && (!Number.isSafeInteger(o.window) || o.window < 1)) {
    throw new RangeError(`window must be a positive integer, got ${String(o.window)}`);
  }
  return o;
}

function describe(x: unknown): string {
  return x === null ? "null" : Array.isArray(x) ? "an array" : typeof x;
}

/** Runs `batches` through `host` per `options` (see the module documentation). */
export async function runTrainLoop(
  host: TrainLoopHost,
  batches: BatchSource,
  options?: TrainOptions,
): Promise<TrainResult> {
  const o = checkOptions(options);
  const isArray = Array.isArray(batches);
  if (isArray && batches.length === 0) {
    throw new RangeError("batches must be a non-empty array of batches, got an empty array");
  }
  const asyncIt = !isArray && batches !== null && typeof batches === "object" &&
    typeof (batches as AsyncIterable<TrainingBatch>)[Symbol.asyncIterator] === "function";
  const syncIt = !isArray && !asyncIt && batches !== null && typeof batches === "object" &&
    typeof (batches as Iterable<TrainingBatch>)[Symbol.iterator] === "function";
  if (!isArray && !asyncIt && !syncIt) {
    throw new TypeError(
      `batches must be an array, an iterable or an async iterable of batches, got ${
        describe(batches)
      }`,
    );
  }
  const one = isArray && batches.length === 1;
  const name = (i: number) => (one ? "batch" : `batches[${i}]`);
  // Arrays are checked whole before any step (nothing runs on a bad batch).
  const arrayPlans = isArray
    ? (batches as readonly (TrainingBatch | null)[]).map((b, i) => host.split(b, name(i), i))
    : null;
  const window = o.window ?? (isArray ? batches.length : DEFAULT_STREAM_WINDOW);
  const steps: StepResult[] = [];
  let t0: number | null = null;
  let aborted = false;
  const runWindow = async (plans: (ModelStagePayload[] | null)[]) => {
    const { run, first } = await host.run(plans);
    t0 ??= run.startTime;
    const done = stepResults(
      run,
      plans.length,
      first,
      host.ranks,
      host.lastRank,
      run.startTime - t0,
    );
    steps.push(...done);
    if (o.onStep !== undefined) { for (const s of done) await o.onStep(s); }
    // With nonFinite "throw" the run stopped at the bad step (it is the last one).
    const bad = done.find((s) => s.skipped === true);
    if (bad !== undefined && host.nonFinite === "throw") {
      throw new NonFiniteStepError(bad.step, bad.nonFinite!);
    }
  };
  const stopped = () => o.signal?.aborted === true;

  if (arrayPlans !== null) {
    for (let at = 0; at < arrayPlans.length; at += window) {
      if (stopped()) {
        aborted = true;
        break;
      }
      await runWindow(arrayPlans.slice(at, at + window));
    }
    return trainResult(steps, host.ranks, aborted);
  }

  let index = 0;
  if (syncIt) {
    const it = (batches as Iterable<TrainingBatch | null>)[Symbol.iterator]();
    let exhausted = false;
    try {
      while (!exhausted) {
        if (stopped()) {
          aborted = true;
          break;
        }
        const plans: (ModelStagePayload[] | null)[] = [];
        while (plans.length < window) {
          const r = it.next();
          if (r.done === true) {
            exhausted = true;
            break;
          }
          plans.push(host.split(r.value, name(index), index++));
        }
        if (plans.length > 0) await runWindow(plans);
      }
    } finally {
      if (!exhausted) it.return?.();
    }
    return trainResult(steps, host.ranks, aborted);
  }

  // Async: the next window is pulled while the current one runs.
  const it = (batches as AsyncIterable<TrainingBatch | null>)[Symbol.asyncIterator]();
  let exhausted = false;
  const pull = async (): Promise<(TrainingBatch | null)[]> => {
    const got: (TrainingBatch | null)[] = [];
    while (got.length < window && !exhausted) {
      const r = await it.next();
      if (r.done === true) exhausted = true;
      else got.push(r.value);
    }
    return got;
  };
  let next: Promise<(TrainingBatch | null)[]> | null = pull();
  try {
    while (next !== null) {
      if (stopped()) {
        aborted = true;
        break;
      }
      const got: (TrainingBatch | null)[] = await next;
      next = null;
      if (got.length === 0) break;
      const plans = got.map((b) => host.split(b, name(index), index++));
      if (!exhausted && !stopped()) {
        next = pull();
        next.catch(() => {}); // seen when awaited
      }
      await runWindow(plans);
    }
  } finally {
    if (next !== null) await next.catch(() => {});
    if (!exhausted) await it.return?.();
  }
  return trainResult(steps, host.ranks, aborted || (!exhausted && stopped()));
}
