/**
 * Ready-made training callbacks for `PipelineParallelModel.train`: a
 * progress bar, a metrics log (JSON lines or CSV), a loss-curve picture,
 * early stopping on a validation metric, and checkpoints at exact steps;
 * and `checkOutputPath`, the check each of them makes of the file it will
 * write, for your own files.
 * Each implements the `TrainCallback` contract from `@conveyor/core`; a
 * callback of your own is any object with some of its methods.
 *
 * @example Stop a run once the validation loss stops improving
 * ```ts
 * import assert from "node:assert/strict";
 * import { EarlyStopping, ProgressBar } from "@conveyor/core/callbacks";
 * const stop = new EarlyStopping({ metric: "loss", patience: 2 });
 * const bar = new ProgressBar({ total: 10, every: 5 });
 * assert.equal(typeof stop.onStepEnd, "function");
 * assert.equal(typeof bar.onStepEnd, "function");
 * ```
 *
 * @module
 */

export {
  ProgressBar,
  type ProgressBarOptions,
} from "./src/pipeline/model/callbacks/progress_bar.ts";
export {
  METRICS_CSV_HEADER,
  type MetricsLine,
  MetricsLogger,
  type MetricsLoggerOptions,
} from "./src/pipeline/model/callbacks/metrics_logger.ts";
export {
  CurveWriter,
  type CurveWriterOptions,
} from "./src/pipeline/model/callbacks/curve_writer.ts";
export {
  EarlyStopping,
  type EarlyStoppingOptions,
} from "./src/pipeline/model/callbacks/early_stopping.ts";
export {
  type CheckpointSource,
  ModelCheckpoint,
  type ModelCheckpointOptions,
} from "./src/pipeline/model/callbacks/model_checkpoint.ts";
export { checkOutputPath, type OutputPathOptions } from "./src/pipeline/model/output_path.ts";

// The types these callbacks' signatures name (from `@conveyor/core`).
export type {
  StepContext,
  TrainBeginInfo,
  TrainCallback,
  TrainWeights,
} from "./src/pipeline/model/train_callback.ts";
export type {
  EvaluateResult,
  NonFiniteReport,
  StepResult,
  TrainResult,
} from "./src/pipeline/model/results.ts";
export type { TimedEvent } from "./src/pipeline/schedule/schedule.ts";
export type { Action, ActionKind } from "./src/pipeline/schedule/action.ts";
export type { SaveCheckpointOptions } from "./src/pipeline/model/checkpoint_file.ts";
export type { Curve } from "./src/pipeline/render/curves_svg.ts";
