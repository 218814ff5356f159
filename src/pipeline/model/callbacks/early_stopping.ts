/**
 * Early stopping on a validation metric.
 *
 * @module
 */

import type { StepResult, TrainResult } from "../results.ts";
import type {
  StepContext,
  TrainBeginInfo,
  TrainCallback,
  TrainWeights,
} from "../train_callback.ts";
import { checkOptionSpelling } from "../../../text/nearest.ts";
import { describeValue } from "../../../text/describe.ts";

const EARLY_STOPPING_OPTIONS: readonly (keyof EarlyStoppingOptions)[] = [
  "metric",
  "mode",
  "patience",
  "minDelta",
  "restoreBest",
];

/** Options of {@linkcode EarlyStopping}. */
export interface EarlyStoppingOptions {
  /** The validation metric watched (default `"loss"`). */
  readonly metric?: "loss" | "accuracy";
  /** Whether lower or higher is better (default: `"min"` for the loss, `"max"` for accuracy). */
  readonly mode?: "min" | "max";
  /** Evaluations without improvement before stopping (default 3). */
  readonly patience?: number;
  /** The least change that counts as an improvement (default 0). */
  readonly minDelta?: number;
  /**
   * Keep a copy of the weights at the best evaluation and put them back when
   * `train` ends, stopped or not, if a later step changed them (Keras's
   * `restore_best_weights`). Only the weights: the optimizer state and the
   * step count stay where training ended. Default false.
   */
  readonly restoreBest?: boolean;
}

/**
 * Stops `train` once the validation metric (of `train`'s `validation`
 * option, evaluated every `validation.every` steps at exact steps) has not
 * improved by more than `minDelta` for `patience` evaluations in a row:
 * no step runs after the evaluation that decides it, and `train` resolves
 * with `stopped` saying why. The state restarts with every `train` call (as
 * Keras's). `update(value, step)` is the same rule by hand (true: stop).
 * With `restoreBest: true` the model ends `train` with the weights of its
 * best evaluation (`restoredStep` says which step's), not the last step's.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { EarlyStopping } from "@conveyor/core/callbacks";
 * const early = new EarlyStopping({ patience: 2 });
 * const losses = [3, 2, 2.5, 2.1]; // validation losses after steps 10, 20, 30, 40
 * const stops = losses.map((loss, i) => early.update(loss, 10 * i + 9));
 * assert.deepEqual(stops, [false, false, false, true]); // no better than 2 twice: stop
 * assert.deepEqual([early.best, early.bestStep], [2, 19]);
 * ```
 */
export class EarlyStopping implements TrainCallback {
  /** The metric watched. */
  readonly metric: "loss" | "accuracy";
  /** `"min"` or `"max"`. */
  readonly mode: "min" | "max";
  /** Evaluations without improvement allowed. */
  readonly patience: number;
  /** The least improvement. */
  readonly minDelta: number;
  /** Whether `train` ends with the best evaluation's weights. */
  readonly restoreBest: boolean;
  #best = NaN;
  #bestStep = -1;
  #wait = 0;
  #weights: TrainWeights | undefined;
  #bestWeights: Uint8Array | undefined;
  #restored = -1;

  /** Checks the options (a RangeError or TypeError naming the option). */
  constructor(options: EarlyStoppingOptions = {}) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(
        `EarlyStopping: options must be an object, got ${describeValue(options)}`,
      );
    }
    checkOptionSpelling(options, EARLY_STOPPING_OPTIONS, "EarlyStopping: ");
    const metric = options.metric ?? "loss";
    if (metric !== "loss" && metric !== "accuracy") {
      throw new TypeError(
        `EarlyStopping: metric must be "loss" or "accuracy", got ${describeValue(metric)}`,
      );
    }
    const mode = options.mode ?? (metric === "loss" ? "min" : "max");
    if (mode !== "min" && mode !== "max") {
      throw new TypeError(`EarlyStopping: mode must be "min" or "max", got ${describeValue(mode)}`);
    }
    const patience = options.patience ?? 3;
    if (!Number.isSafeInteger(patience) || patience < 1) {
      throw new RangeError(
        `EarlyStopping: patience must be a positive integer, got ${describeValue(patience)}`,
      );
    }
    const minDelta = options.minDelta ?? 0;
    if (typeof minDelta !== "number" || !Number.isFinite(minDelta) || minDelta < 0) {
      throw new RangeError(
        `EarlyStopping: minDelta must be a finite number >= 0, got ${describeValue(minDelta)}`,
      );
    }
    const restoreBest = options.restoreBest ?? false;
    if (typeof restoreBest !== "boolean") {
      throw new TypeError(
        `EarlyStopping: restoreBest must be a boolean, got ${describeValue(restoreBest)}`,
      );
    }
    this.metric = metric;
    this.mode = mode;
    this.patience = patience;
    this.minDelta = minDelta;
    this.restoreBest = restoreBest;
  }

  /**
   * With `restoreBest`: the step (`StepResult.step`) whose weights the last
   * `train` call put back at its end; -1 when it put none back (the last
   * step was the best, or no evaluation ran).
   */
  get restoredStep(): number {
    return this.#restored;
  }

  /** The best value so far (NaN before the first). */
  get best(): number {
    return this.#best;
  }

  /** The step (`StepResult.step`) of the best value; -1 before the first. */
  get bestStep(): number {
    return this.#bestStep;
  }

  /** Records `value` measured after `step`; true when training should stop. */
  update(value: number, step: number): boolean {
    const better = Number.isNaN(this.#best) ||
      (this.mode === "min"
        ? value < this.#best - this.minDelta
        : value > this.#best + this.minDelta);
    if (better && Number.isFinite(value)) {
      this.#best = value;
      this.#bestStep = step;
      this.#wait = 0;
      return false;
    }
    this.#wait++;
    return this.#wait >= this.patience;
  }

  /** Restarts the state; refuses a `train` call without validation (TypeError). */
  onTrainBegin(info: TrainBeginInfo): void {
    if (info.validationEvery === undefined) {
      throw new TypeError(
        "EarlyStopping watches the validation " + this.metric +
          ": give train a validation option { batch, every }",
      );
    }
    if (this.restoreBest && info.weights === undefined) {
      throw new TypeError(
        "EarlyStopping: restoreBest needs the model's weights, which this train call does not " +
          "give its callbacks",
      );
    }
    this.#best = NaN;
    this.#bestStep = -1;
    this.#wait = 0;
    this.#weights = this.restoreBest ? info.weights : undefined;
    this.#bestWeights = undefined;
    this.#restored = -1;
  }

  /**
   * At validation steps: records the metric (with `restoreBest`, a copy of
   * the weights when it is the best so far) and stops `train` when patience
   * runs out.
   */
  async onStepEnd(step: StepResult, context: StepContext): Promise<void> {
    const v = context.validation;
    if (v === undefined) return;
    const value = this.metric === "loss" ? v.loss : v.accuracy;
    if (value === undefined) {
      throw new TypeError(
        "EarlyStopping: the validation has no accuracy (a cross-entropy loss reports it)",
      );
    }
    const stop = this.update(value, step.step);
    if (this.#weights !== undefined && this.#bestStep === step.step) {
      this.#bestWeights = await this.#weights.save();
    }
    if (stop) {
      context.stop(
        `early stopping: the validation ${this.metric} did not improve for ${this.patience} ` +
          `evaluations (best ${this.#best} after step ${this.#bestStep + 1})`,
      );
    }
  }

  /** With `restoreBest`: puts back the best evaluation's weights if a later step changed them. */
  async onTrainEnd(result: TrainResult): Promise<void> {
    const last = result.steps.length > 0 ? result.steps[result.steps.length - 1].step : -1;
    if (this.#weights !== undefined && this.#bestWeights !== undefined && this.#bestStep < last) {
      await this.#weights.load(this.#bestWeights);
      this.#restored = this.#bestStep;
    }
    this.#bestWeights = undefined; // not held after the call
  }
}
