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
import type { ModelStageReport } from "./model_stage_executor.ts";

/** What one training step measured and computed. */
export interface StepResult {
  /** Index of the step over the model's life (0-based). */
  readonly step: number;
  /** Full-batch loss (sum of the micro-batch shares). */
  readonly loss: number;
  /** From the step's first action start to its last action end, ms. */
  readonly makespanMs: number;
  /** `1 − Σ busy / (p · makespan)` of the step. */
  readonly bubble: number;
  /** Time each rank spent in actions during the step, ms. */
  readonly busyMs: readonly number[];
  /** Peak activation bytes per rank (above parameters, gradients and optimizer state). */
  readonly peakActivationBytes: readonly number[];
  /** Global gradient norm before clipping (with `clipGradNorm`). */
  readonly gradNorm?: number;
  /** The step's actions, times in ms from the run's start. */
  readonly events: readonly TimedEvent[];
}

/** What `PipelineParallelModel.train` returns. */
export interface TrainResult {
  /** One result per batch. */
  readonly steps: readonly StepResult[];
  /** From the first action start to the last action end over all steps, ms. */
  readonly makespanMs: number;
  /** Bubble over the whole run. */
  readonly bubble: number;
  /** With 2 or more steps: the bubble of the last period (steps interlock). */
  readonly steadyStateBubble?: number;
  /** Every action of every rank, times in ms from the run's start. */
  readonly events: readonly TimedEvent[];
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
 * The per-step results of a training run of `steps` iterations whose first
 * step index over the model's life is `firstStep`; `lastRank` holds the
 * last stage (its report carries the loss).
 */
export function trainResult(
  run: RankGroupRunResult,
  steps: number,
  firstStep: number,
  ranks: number,
  lastRank: number,
): TrainResult {
  const results: StepResult[] = Array.from({ length: steps }, (_, i) => {
    const it = run.firstIteration + i;
    const events = run.events.filter((e) => e.iteration === it);
    const sum = summarizeTimeline(events, ranks);
    const reports = run.reports.map((rs) => rs[i] as ModelStageReport);
    const gradNorm = reports[0].gradNorm;
    return {
      step: firstStep + i,
      loss: reports[lastRank].loss as number,
      makespanMs: sum.makespan,
      bubble: sum.bubbleFraction,
      busyMs: sum.busy,
      peakActivationBytes: reports.map((x) => x.peakActivationBytes),
      ...(gradNorm === undefined ? {} : { gradNorm }),
      events,
    };
  });
  return {
    steps: results,
    makespanMs: run.makespan,
    bubble: run.bubbleFraction,
    ...(run.steadyStateBubble === undefined ? {} : { steadyStateBubble: run.steadyStateBubble }),
    events: run.events,
  };
}
