// The JSON lines `cli.ts train --json` prints (a contract: see the README).

import type { NonFiniteReport } from "../pipeline/model/results.ts";

/** One line of `train --json` per step. */
export interface TrainStepJson {
  /** Step number, from 1. */
  readonly step: number;
  /** Full-batch cross-entropy loss of the step. */
  readonly loss: number;
  /** Measured bubble fraction of the step. */
  readonly bubble: number;
  /** Measured makespan of the step, ms. */
  readonly makespanMs: number;
  /** The step's learning rate (per `--lr-schedule`). */
  readonly lr: number;
  /**
   * Present (true) only when the step was skipped: its loss or a gradient
   * was not finite, so it changed no parameter and no optimizer state (it
   * still counts: the next line is the next step).
   */
  readonly skipped?: true;
  /** For a skipped step: where the non-finite value appeared. */
  readonly nonFinite?: NonFiniteReport;
}

/** The last line of `train --json`. */
export interface TrainParamsJson {
  /** Σ of all parameters (f64, in the model's parameter order). */
  readonly paramSum: number;
  /** Σ of their squares. */
  readonly paramSumSq: number;
}
