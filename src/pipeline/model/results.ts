/**
 * What a model's steps, runs and predictions give back, and how a rank
 * group's run becomes per-step results.
 *
 * @module
 */

import type { Shape } from "../../tensor/mod.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import { summarizeTimeline } from "../analysis/timeline_summary.ts";
import type { RankGroupRunResult } from "../runtime/rank_group.ts";
import type { ModelStageReport } from "./model_rank_executor.ts";

/** What one training step measured and computed. */
export interface StepResult {
  /** Index of the step over the model's life (0-based). */
  readonly step: number;
  /** Full-batch loss (sum of the micro-batch shares). */
  readonly loss: number;
  /**
   * The learning rate of the step's optimizer steps: the schedule's
   * `lrAt(lrSchedule, lr, step)`, or the one set by `setLearningRate`.
   */
  readonly lr: number;
  /** From the step's first action start to its last action end, ms. */
  readonly makespanMs: number;
  /** `1 − Σ busy / (p · makespan)` of the step. */
  readonly bubble: number;
  /** Time each rank spent in actions during the step, ms. */
  readonly busyMs: readonly number[];
  /**
   * Peak activation bytes per rank: the most its backend held during the
   * step above parameters, gradients, optimizer state and rollback copies
   * (activations kept for backward and the passes' temporaries).
   */
  readonly peakActivationBytes: readonly number[];
  /** Global gradient norm before clipping (with `clipGradNorm`). */
  readonly gradNorm?: number;
  /** The step's actions, times in ms from the run's start. */
  readonly events: readonly TimedEvent[];
  /**
   * True when a loss or gradient of the step was not finite: the step was
   * rolled back on every stage (parameters and optimizer state as before
   * it, bit for bit) and `nonFinite` says where it first appeared.
   */
  readonly skipped?: boolean;
  /** Where a skipped step's non-finite value appeared (the lowest stage that saw one). */
  readonly nonFinite?: NonFiniteReport;
}

/** Where a step's non-finite value appeared. */
export interface NonFiniteReport {
  /** The stage (the lowest whose check failed). */
  readonly stage: number;
  /** A loss (the last stage) or a gradient. */
  readonly what?: "loss" | "gradient";
  /** For a loss: the first micro-batch whose loss was not finite. */
  readonly microBatch?: number;
}

/**
 * A step's loss or gradients were not finite (with `nonFinite: "throw"`):
 * the step was rolled back on every stage, the steps before it stand, none
 * after it ran. The model stays usable.
 *
 * @example
 * ```ts
 * import { NonFiniteStepError } from "@conveyor/core";
 * const e = new NonFiniteStepError(7, { stage: 1, what: "loss", microBatch: 2 });
 * console.log(e.message); // "step 7 was rolled back: stage 1 found a non-finite loss in micro-batch 2"
 * ```
 */
export class NonFiniteStepError extends Error {
  /** The step (0-based over the model's life). */
  readonly step: number;
  /** Where the value appeared. */
  readonly where: NonFiniteReport;

  /** Builds the error for `step` at `where`. */
  constructor(step: number, where: NonFiniteReport) {
    super(
      `step ${step} was rolled back: stage ${where.stage} found a non-finite ${
        where.what ?? "value"
      }${where.microBatch === undefined ? "" : ` in micro-batch ${where.microBatch}`}`,
    );
    this.name = "NonFiniteStepError";
    this.step = step;
    this.where = where;
  }
}

/** What `PipelineParallelModel.train` returns. */
export interface TrainResult {
  /** One result per batch trained, in order. */
  readonly steps: readonly StepResult[];
  /** From the first action start to the last action end over all steps, ms. */
  readonly makespanMs: number;
  /** Bubble over the whole call: `1 − Σ busy / (p · makespan)`. */
  readonly bubble: number;
  /**
   * With 2 or more steps: `1 − (Σ busy / steps) / (p · period)`, the period
   * being the median time between the ends of consecutive steps over the
   * call (as the benches measure it; one period alone swings with whatever
   * the machine did during it).
   */
  readonly steadyStateBubble?: number;
  /** Every action of every rank, times in ms from the call's first action. */
  readonly events: readonly TimedEvent[];
  /** Whether `signal` stopped the call before its batches ran out. */
  readonly aborted: boolean;
  /** The reason a hook gave when it stopped the call (`context.stop`), e.g. early stopping. */
  readonly stopped?: string;
}

/** What `PipelineParallelModel.evaluate` returns. */
export interface EvaluateResult {
  /** The batch's loss (mean over its rows), as a training step would report it. */
  readonly loss: number;
  /** Rows (predictions) the loss averages over. */
  readonly rows: number;
  /** Cross-entropy: rows whose first maximal logit is the target class. */
  readonly correct?: number;
  /** Cross-entropy: `correct / rows`. */
  readonly accuracy?: number;
}

/** A prediction: data and shape. */
export interface Prediction {
  /** Output data, row-major. */
  readonly data: Float32Array;
  /** Output shape. */
  readonly shape: Shape;
}

/** Sum, sum of squares (f64) and count of a set of parameters. */
export interface ParameterStats {
  /** Σ values. */
  readonly sum: number;
  /** Σ values². */
  readonly sumSq: number;
  /** Number of scalars. */
  readonly count: number;
}

/**
 * The per-step results of a run of `steps` training iterations whose first
 * step index over the model's life is `firstStep`; `lastRank` holds the
 * last stage (its report carries the loss). Event times move by `shiftMs`
 * (onto the clock of a `train()` call made of several runs).
 */
export function stepResults(
  run: RankGroupRunResult,
  steps: number,
  firstStep: number,
  ranks: number,
  lastRank: number,
  shiftMs = 0,
): StepResult[] {
  // A run stopped at a bad step ("throw") reports fewer iterations.
  const done = Math.min(steps, ...run.reports.map((r) => r.length));
  const rolled = new Map(run.rolledBack.map((r) => [r.iteration, r]));
  // With clipping the norm is known once every stage's flag is in, after the reports.
  const norms = new Map(run.gradNorms.map((n) => [n.iteration, n.norm]));
  return Array.from({ length: done }, (_, i) => {
    const it = run.firstIteration + i;
    const bad = rolled.get(it);
    const events = run.events.filter((e) => e.iteration === it).map((e) =>
      shiftMs === 0 ? e : { ...e, start: e.start + shiftMs, end: e.end + shiftMs }
    );
    const sum = summarizeTimeline(events, ranks);
    const reports = run.reports.map((rs) => rs[i] as ModelStageReport);
    const gradNorm = norms.get(it) ?? reports[0].gradNorm;
    return {
      step: firstStep + i,
      loss: reports[lastRank].loss as number,
      lr: reports[lastRank].lr ?? reports[0].lr ?? NaN,
      makespanMs: sum.makespan,
      bubble: sum.bubbleFraction,
      busyMs: sum.busy,
      peakActivationBytes: reports.map((x) => x.peakActivationBytes),
      ...(gradNorm === undefined ? {} : { gradNorm }),
      events,
      ...(bad === undefined ? {} : {
        skipped: true,
        nonFinite: {
          stage: bad.stage,
          ...(bad.what === undefined ? {} : { what: bad.what }),
          ...(bad.microBatch === undefined ? {} : { microBatch: bad.microBatch }),
        },
      }),
    };
  });
}

/**
 * A `train()` call's result from its steps (events on the call's clock):
 * makespan and bubble over all events, and with 2 or more steps the
 * steady-state bubble from the median period (`summarizeTimeline` with
 * `steadyFrom: 1`, as the benches measure it).
 */
export function trainResult(
  steps: readonly StepResult[],
  ranks: number,
  aborted: boolean,
  stopped?: string,
): TrainResult {
  const events = steps.flatMap((s) => s.events).sort((a, b) =>
    a.start - b.start || a.rank - b.rank
  );
  const sum = summarizeTimeline(events, ranks, steps.length >= 2 ? { steadyFrom: 1 } : {});
  return {
    steps,
    makespanMs: sum.makespan,
    bubble: sum.bubbleFraction,
    ...(sum.steadyStateBubble === undefined ? {} : { steadyStateBubble: sum.steadyStateBubble }),
    events,
    aborted,
    ...(stopped === undefined ? {} : { stopped }),
  };
}
