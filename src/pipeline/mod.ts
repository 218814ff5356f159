/**
 * Pipeline parallelism for training scripts and schedule studies:
 * schedules as data, their validation, simulation and pictures,
 * partitioning, activation checkpointing and `PipelineParallelModel`.
 * The runtime's parts (transports, rank groups, executors) are in
 * `@conveyor/core/runtime`; the synthetic executor and fault injection in
 * `@conveyor/core/testing`.
 *
 * @module
 */

export type { Action, ActionKind, RankActions } from "./schedule/action.ts";
export { formatAction, parseAction } from "./schedule/action.ts";
export type { Schedule, TimedEvent } from "./schedule/schedule.ts";
export type { ActionCosts, CostValue } from "./schedule/costs.ts";
export type { GenerateOptions, ScheduleName } from "./schedule/generate.ts";
export { generateSchedule, MAX_SCHEDULE_ACTIONS, SCHEDULE_NAMES } from "./schedule/generate.ts";
export { scheduleFromCsv, scheduleToCsv } from "./schedule/schedule_csv.ts";
export type { SimulateOptions, SimulationResult } from "./analysis/simulate.ts";
export { simulate } from "./analysis/simulate.ts";
export { estimateBubbleFraction } from "./analysis/bubble_estimate.ts";
export type { ScheduleProblem, ScheduleProblemKind } from "./analysis/schedule_problem.ts";
export type { ScheduleStall } from "./analysis/validate.ts";
export { checkSchedule, ScheduleDeadlockError, validateSchedule } from "./analysis/validate.ts";
export type { SummarizeTimelineOptions, TimelineSummary } from "./analysis/timeline_summary.ts";
export { summarizeTimeline } from "./analysis/timeline_summary.ts";
export type { AsciiOptions } from "./render/render_ascii.ts";
export { renderAscii } from "./render/render_ascii.ts";
export type { SvgOptions } from "./render/render_svg.ts";
export { renderSvg } from "./render/render_svg.ts";
export type { ChromeTrace, ChromeTraceEvent, ChromeTraceOptions } from "./render/chrome_trace.ts";
export { toChromeTrace } from "./render/chrome_trace.ts";
export { type Curve, type CurvesInput, curvesSvg } from "./render/curves_svg.ts";
export type {
  CostedLayer,
  PartitionInput,
  PartitionOptions,
  PartitionResult,
  PartitionStrategy,
  UniformPartitionOptions,
} from "./partition/partition.ts";
export {
  evaluatePartition,
  FixedPartition,
  LoadBalancedPartition,
  UniformPartition,
  validatePartition,
} from "./partition/partition.ts";
export type { CostSource, ProfileOptions } from "./partition/layer_costs.ts";
export { layerCosts, profileLayerCosts } from "./partition/layer_costs.ts";
export type {
  LayerPasses,
  PassProfile,
  PassProfileOptions,
  PassTiming,
} from "./partition/layer_passes.ts";
export { passTiming, profileLayerPasses, relativeSpread } from "./partition/layer_passes.ts";
export type {
  LayerSummary,
  ModelSummary,
  StageSummary,
  SummaryOptions,
} from "./partition/summary.ts";
export { summary } from "./partition/summary.ts";
export type { ChunkMemory, ChunkMemoryOptions } from "./partition/chunk_memory.ts";
export { profileChunkMemory } from "./partition/chunk_memory.ts";
export type { LayerBytes, RankMemory } from "./advise/rank_memory.ts";
export { activationPeaks, rankMemory } from "./advise/rank_memory.ts";
export type {
  LayerTimes,
  PlannedCandidate,
  PredictOptions,
  RuntimeOverheads,
  StageCostTable,
  StepPrediction,
  TogetherTimes,
} from "./advise/step_prediction.ts";
export {
  layerLoads,
  MAX_RANK_BALANCE_CUTS,
  planCandidate,
  predictStep,
  rankBalancedBoundaries,
  stageCosts,
} from "./advise/step_prediction.ts";
export type { AdviceCandidate, AdviceJson } from "./advise/advice_table.ts";
export {
  adviceJson,
  formatAdviceTable,
  formatBytes,
  rankCandidates,
} from "./advise/advice_table.ts";
export type {
  ActivationCheckpointOptions,
  CheckpointSegment,
  ChunkCheckpointPlan,
  RecomputePolicy,
} from "./checkpoint/checkpoint.ts";
export { ActivationCheckpointConfig, DEFAULT_EXPENSIVE_KINDS } from "./checkpoint/checkpoint.ts";
export { CheckpointedChunk } from "./checkpoint/checkpointed_chunk.ts";
export type { LinkModel, LinkSample } from "./comm/link_model.ts";
export { linkFromSamples, messageDelay } from "./comm/link_model.ts";
export type { CommBackend, ControlHandler, ControlMessage, SendOptions } from "./comm/backend.ts";
export type { FaultInjection, FaultKind } from "./runtime/fault_injection.ts";
export type { RankGroupKind } from "./runtime/rank_group.ts";
export type { PipelineFailure, PipelineFailureKind } from "./runtime/pipeline_worker_error.ts";
export { PipelineWorkerError } from "./runtime/pipeline_worker_error.ts";
export type { PipelineLoss } from "./model/model_stage_executor.ts";
export type { PipelineParallelModelOptions } from "./model/options.ts";
export type { TrainingBatch } from "./model/batch.ts";
export type {
  EvaluateResult,
  NonFiniteReport,
  ParameterStats,
  Prediction,
  StepResult,
  TrainResult,
} from "./model/results.ts";
export { NonFiniteStepError } from "./model/results.ts";
export type { BatchSource, TrainOptions } from "./model/train_loop.ts";
export { DEFAULT_STREAM_WINDOW } from "./model/train_loop.ts";
export type {
  StepContext,
  TrainBeginInfo,
  TrainCallback,
  ValidationOptions,
} from "./model/train_callback.ts";
export type { WriteTraceOptions } from "./model/pipeline_parallel_model.ts";
export { checkOutputPath, type OutputPathOptions } from "./model/output_path.ts";
export { ProgressBar, type ProgressBarOptions } from "./model/callbacks/progress_bar.ts";
export {
  METRICS_CSV_HEADER,
  type MetricsLine,
  MetricsLogger,
  type MetricsLoggerOptions,
} from "./model/callbacks/metrics_logger.ts";
export { CurveWriter, type CurveWriterOptions } from "./model/callbacks/curve_writer.ts";
export { EarlyStopping, type EarlyStoppingOptions } from "./model/callbacks/early_stopping.ts";
export {
  type CheckpointSource,
  ModelCheckpoint,
  type ModelCheckpointOptions,
} from "./model/callbacks/model_checkpoint.ts";
export type { SaveCheckpointOptions } from "./model/checkpoint_file.ts";
export type { RankInfo } from "./model/stage_calls.ts";
export { PipelineParallelModel } from "./model/pipeline_parallel_model.ts";
export type {
  Advice,
  AdviceProfile,
  AdviseModule,
  AdviseOptions,
  SkippedCandidate,
} from "./model/advise.ts";
export { adviseSchedule } from "./model/advise.ts";
