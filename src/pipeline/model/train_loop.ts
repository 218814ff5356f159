/**
 * `PipelineParallelModel.train`'s loop: batches from an array, an iterable
 * or an `AsyncIterable`, run in windows of consecutive steps (one rank-group
 * run each: the steps of a window interlock, each rank going on to the next
 * step right after its own last action), the hooks of each step (`onStep`,
 * validation, `callbacks`) after its window, and an `AbortSignal` seen
 * between windows.
 *
 * **Windows.** An array runs as one window by default (every step
 * interlocks); an iterable or async iterable in windows of
 * {@linkcode DEFAULT_STREAM_WINDOW} steps, pulled as the window starts. A
 * window always ends at a step whose hooks need the model: every step when
 * `onStep` is given, the steps a callback names with `every`, and the
 * validation steps (see `train_callback.ts`: such a step is exact, its
 * hooks see the model and the data of exactly that step). An async
 * source's next window is pulled while the current one runs only when the
 * current one does not end at such a step. The trade-off of `window`:
 * larger windows interlock more steps (a window boundary costs one pipeline
 * fill and drain) and pay fewer round trips; smaller ones stop sooner on
 * `signal` and hold fewer batches.
 *
 * @module
 */

import type { NonFinitePolicy } from "../runtime/run_policy.ts";
import type { RankGroupRunResult } from "../runtime/rank_group.ts";
import type { ModelStagePayload } from "./model_rank_executor.ts";
import type { TrainingBatch } from "./batch.ts";
import {
  type EvaluateResult,
  NonFiniteStepError,
  type StepResult,
  stepResults,
  type TrainResult,
  trainResult,
} from "./results.ts";
import type {
  StepContext,
  TrainBeginInfo,
  TrainCallback,
  TrainWeights,
  ValidationOptions,
} from "./train_callback.ts";
import { checkOptionSpelling } from "../../text/nearest.ts";
import { describeValue } from "../../text/describe.ts";

/**
 * Steps per rank-group run when `train`'s batches come from an (async)
 * iterable and `window` is not given.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { DEFAULT_STREAM_WINDOW } from "./train_loop.ts";
 * assert.equal(DEFAULT_STREAM_WINDOW, 4);
 * ```
 */
export const DEFAULT_STREAM_WINDOW = 4;

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
   * Called with each step's result, in step order (awaited), with the model
   * standing exactly after that step and no later batch pulled: every step
   * ends a window when `onStep` is given (each window boundary costs one
   * pipeline fill and drain; `callbacks` that only read the results keep the
   * windows). The model may be used from it (evaluate, checkpoint,
   * setLearningRate, loadSafetensors; not loadCheckpoint, which would move
   * the step count under the running call). Outside the hooks the calls
   * that change the model are refused while `train` runs. A throw stops
   * `train` and is rethrown; the model stays usable.
   */
  readonly onStep?: (step: StepResult, context: StepContext) => void | Promise<void>;
  /** Reusable hooks, called after `onStep` in list order (see `TrainCallback`). */
  readonly callbacks?: readonly TrainCallback[];
  /**
   * A batch evaluated (forward only) after every `every`-th step; its result
   * reaches the step's hooks as `context.validation`.
   */
  readonly validation?: ValidationOptions;
  /**
   * Stops the call after the window that runs when it aborts (no window
   * starts once it has aborted): `train` resolves with the steps done and
   * `aborted: true`, and the model stays usable. Batches an async source
   * gave for the next window are dropped.
   */
  readonly signal?: AbortSignal;
  /**
   * The most steps per rank-group run (positive integer; default: all of an
   * array, {@linkcode DEFAULT_STREAM_WINDOW} for iterables). Windows also
   * end at exact steps. Larger windows interlock more steps (a boundary
   * costs one pipeline fill and drain) and pay fewer round trips; smaller
   * ones stop sooner on `signal` and hold fewer batches.
   */
  readonly window?: number;
}

/** What the loop needs of the model. */
export interface TrainLoopHost {
  /** Checks the call's `index`-th batch (`where` names it) and splits it into each rank's payload. */
  split(batch: TrainingBatch | null, where: string, index: number): ModelStagePayload[] | null;
  /** Runs one window (exclusively; a failed run closes the model) and advances the step count. */
  run(
    plans: readonly (ModelStagePayload[] | null)[],
  ): Promise<{ run: RankGroupRunResult; first: number }>;
  /** What a non-finite step does: "throw" stops `train` with a NonFiniteStepError. */
  readonly nonFinite: NonFinitePolicy;
  /** Ranks p. */
  readonly ranks: number;
  /** The rank of the last stage. */
  readonly lastRank: number;
  /** The model's step count when the call starts (the index of its first step). */
  readonly firstStep: number;
  /** Under MPI, this process's rank; else null. */
  readonly localRank: number | null;
  /** Checks the validation batch as `evaluate` would (named `where`), before any step. */
  checkValidation(batch: TrainingBatch, where: string): void;
  /** A forward-only evaluation of `batch`. */
  evaluate(batch: TrainingBatch): Promise<EvaluateResult>;
  /**
   * Runs a hook for `step` (-1 before the first step of a fresh model): the
   * model's calls from it are refused unless the model stands after `step`.
   */
  hook<T>(step: number, fn: () => T | Promise<T>): Promise<T>;
  /** The call's steps so far (for `writeTrace` from a hook). */
  record(steps: readonly StepResult[]): void;
  /** The model's weights, for callbacks that keep and restore them. */
  readonly weights?: TrainWeights;
}

const TRAIN_OPTIONS: readonly (keyof TrainOptions)[] = [
  "onStep",
  "callbacks",
  "validation",
  "signal",
  "window",
];

function checkOptions(o: TrainOptions | undefined): TrainOptions {
  if (o === undefined) return {};
  if (o === null || typeof o !== "object") {
    throw new TypeError(
      `train options must be an object { onStep, callbacks, validation, signal, window }, got ${
        describeValue(o)
      }`,
    );
  }
  checkOptionSpelling(o, TRAIN_OPTIONS, "train: ");
  if (o.onStep !== undefined && typeof o.onStep !== "function") {
    throw new TypeError(`onStep must be a function (step) => void, got ${typeof o.onStep}`);
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new TypeError(`signal must be an AbortSignal, got ${describeValue(o.signal)}`);
  }
  if (o.window !== undefined && (!Number.isSafeInteger(o.window) || o.window < 1)) {
    throw new RangeError(`window must be a positive integer, got ${describeValue(o.window)}`);
  }
  return o;
}

const METHODS = ["onTrainBegin", "onStepEnd", "onTrainEnd"] as const;

function checkEvery(every: unknown, where: string): void {
  if (every !== undefined && (!Number.isSafeInteger(every) || (every as number) < 1)) {
    throw new RangeError(`${where} must be a positive integer, got ${describeValue(every)}`);
  }
}

function checkCallbacks(list: unknown): readonly TrainCallback[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) {
    throw new TypeError(`callbacks must be an array of TrainCallback, got ${describe(list)}`);
  }
  list.forEach((c, i) => {
    if (c === null || typeof c !== "object") {
      throw new TypeError(
        `callbacks[${i}] must be an object { every, onTrainBegin, onStepEnd, onTrainEnd }, ` +
          `got ${describe(c)}`,
      );
    }
    checkEvery(c.every, `callbacks[${i}].every`);
    for (const m of METHODS) {
      if (c[m] !== undefined && typeof c[m] !== "function") {
        throw new TypeError(`callbacks[${i}].${m} must be a function, got ${typeof c[m]}`);
      }
    }
  });
  return list;
}

function checkValidation(
  v: ValidationOptions | undefined,
  host: TrainLoopHost,
): ValidationOptions | undefined {
  if (v === undefined) return undefined;
  if (v === null || typeof v !== "object") {
    throw new TypeError(`validation must be an object { batch, every }, got ${describe(v)}`);
  }
  checkOptionSpelling(v, ["batch", "every"], "train: validation: ");
  checkEvery(v.every, "validation.every");
  if (v.every === undefined) {
    throw new RangeError("validation.every must be a positive integer, got undefined");
  }
  host.checkValidation(v.batch, "validation.batch");
  return v;
}

function describe(x: unknown): string {
  return x === null ? "null" : Array.isArray(x) ? "an array" : typeof x;
}

/** Runs `batches` through `host` per `options`, in windows (see {@linkcode TrainOptions.window}). */
export async function runTrainLoop(
  host: TrainLoopHost,
  batches: BatchSource,
  options?: TrainOptions,
): Promise<TrainResult> {
  const o = checkOptions(options);
  const callbacks = checkCallbacks(o.callbacks);
  const isArray = Array.isArray(batches);
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
  const validation = checkValidation(o.validation, host);
  const one = isArray && batches.length === 1;
  const name = (i: number) => (one ? "batch" : `batches[${i}]`);
  // Arrays are checked whole before any step (nothing runs on a bad batch).
  const arrayPlans = isArray
    ? (batches as readonly (TrainingBatch | null)[]).map((b, i) => host.split(b, name(i), i))
    : null;
  const window = o.window ?? (isArray ? Math.max(1, batches.length) : DEFAULT_STREAM_WINDOW);
  const base = host.firstStep;
  // Whether the hooks of the call's i-th step need the model exactly there.
  const exactAt = (i: number): boolean => {
    const count = base + i + 1;
    return o.onStep !== undefined ||
      (validation !== undefined && count % validation.every === 0) ||
      callbacks.some((c) => c.every !== undefined && count % c.every === 0);
  };
  // Steps of the window that starts at the call's i-th step.
  const lengthFrom = (i: number): number => {
    for (let k = 0; k < window - 1; k++) if (exactAt(i + k)) return k + 1;
    return window;
  };

  const begin: TrainBeginInfo = {
    firstStep: base,
    ...(isArray ? { steps: batches.length } : {}),
    localRank: host.localRank,
    ...(validation === undefined ? {} : { validationEvery: validation.every }),
    ...(host.weights === undefined ? {} : { weights: host.weights }),
  };
  for (const c of callbacks) {
    if (c.onTrainBegin !== undefined) await host.hook(base - 1, () => c.onTrainBegin!(begin));
  }

  const steps: StepResult[] = [];
  let t0: number | null = null;
  let aborted = false;
  let stopped: string | undefined;
  const stop = (reason: string) => void (stopped ??= String(reason));
  // Runs a window; `exactEnd`: no batch after it has been pulled.
  const runWindow = async (plans: (ModelStagePayload[] | null)[], exactEnd: boolean) => {
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
    host.record(steps);
    for (let k = 0; k < done.length; k++) {
      const s = done[k];
      const due = validation !== undefined && (s.step + 1) % validation.every === 0;
      const result = due
        ? await host.hook(s.step, () => host.evaluate(validation!.batch))
        : undefined;
      const context: StepContext = {
        ...(result === undefined ? {} : { validation: result }),
        exact: exactEnd && k === done.length - 1,
        stop,
      };
      if (o.onStep !== undefined) await host.hook(s.step, () => o.onStep!(s, context));
      for (const c of callbacks) {
        if (c.onStepEnd !== undefined) await host.hook(s.step, () => c.onStepEnd!(s, context));
      }
    }
    // With nonFinite "throw" the run stopped at the bad step (it is the last one).
    const bad = done.find((s) => s.skipped === true);
    if (bad !== undefined && host.nonFinite === "throw") {
      throw new NonFiniteStepError(bad.step, bad.nonFinite!);
    }
  };
  const halted = (): boolean => {
    if (o.signal?.aborted === true) aborted = true;
    return aborted || stopped !== undefined;
  };

  if (arrayPlans !== null) {
    for (let at = 0; at < arrayPlans.length && !halted();) {
      const n = Math.min(lengthFrom(at), arrayPlans.length - at);
      await runWindow(arrayPlans.slice(at, at + n), true);
      at += n;
    }
  } else if (syncIt) {
    let index = 0;
    const it = (batches as Iterable<TrainingBatch | null>)[Symbol.iterator]();
    let exhausted = false;
    try {
      while (!exhausted && !halted()) {
        const plans: (ModelStagePayload[] | null)[] = [];
        const n = lengthFrom(index);
        while (plans.length < n) {
          const r = it.next();
          if (r.done === true) {
            exhausted = true;
            break;
          }
          plans.push(host.split(r.value, name(index), index++));
        }
        if (plans.length > 0) await runWindow(plans, true);
      }
    } finally {
      if (!exhausted) it.return?.();
    }
  } else {
    await asyncWindows(
      (batches as AsyncIterable<TrainingBatch | null>)[Symbol.asyncIterator](),
      (b, i) => host.split(b, name(i), i),
      lengthFrom,
      exactAt,
      halted,
      runWindow,
    );
  }
  const result = trainResult(steps, host.ranks, aborted, stopped);
  const last = steps.length > 0 ? steps[steps.length - 1].step : base - 1;
  for (const c of callbacks) {
    if (c.onTrainEnd !== undefined) await host.hook(last, () => c.onTrainEnd!(result));
  }
  return result;
}

/**
 * An async source's windows: the next window is pulled while the current
 * one runs, unless the current one ends at an exact step (its hooks must
 * see the source as it stands after that step).
 */
async function asyncWindows(
  it: AsyncIterator<TrainingBatch | null>,
  split: (b: TrainingBatch | null, index: number) => ModelStagePayload[] | null,
  lengthFrom: (index: number) => number,
  exactAt: (index: number) => boolean,
  halted: () => boolean,
  runWindow: (plans: (ModelStagePayload[] | null)[], exactEnd: boolean) => Promise<void>,
): Promise<void> {
  let exhausted = false;
  let index = 0;
  const pull = async (n: number): Promise<(TrainingBatch | null)[]> => {
    const got: (TrainingBatch | null)[] = [];
    while (got.length < n && !exhausted) {
      const r = await it.next();
      if (r.done === true) exhausted = true;
      else got.push(r.value);
    }
    return got;
  };
  const ahead = () => {
    const p = pull(lengthFrom(index));
    p.catch(() => {}); // seen when awaited
    return p;
  };
  let next: Promise<(TrainingBatch | null)[]> | null = halted() ? null : ahead();
  try {
    while (next !== null) {
      const got: (TrainingBatch | null)[] = await next;
      next = null;
      if (got.length === 0 || halted()) break;
      const plans = got.map((b) => split(b, index++));
      if (!exhausted && !exactAt(index - 1) && !halted()) next = ahead();
      await runWindow(plans, next === null);
      if (next === null && !exhausted && !halted()) next = ahead();
    }
  } finally {
    if (next !== null) await next.catch(() => {});
    if (!exhausted) await it.return?.();
  }
}
