/**
 * Pipeline schedules, validation, simulation, rendering, partitioning,
 * checkpointing and the worker runtime.
 *
 * @module
 */

export type { Action, ActionKind, RankActions } from "./action.ts";
export { formatAction, parseAction } from "./action.ts";
export type { Schedule, TimedEvent } from "./schedule.ts";
export type { AsciiOptions } from "./render_ascii.ts";
export { renderAscii } from "./render_ascii.ts";
export type { SvgOptions } from "./render_svg.ts";
export { renderSvg } from "./render_svg.ts";
export type { ChromeTrace, ChromeTraceEvent, ChromeTraceOptions } from "./chrome_trace.ts";
export { toChromeTrace } from "./chrome_trace.ts";
export { scheduleFromCsv, scheduleToCsv } from "./schedule_csv.ts";
export type {
  CostedLayer,
  PartitionInput,
  PartitionOptions,
  PartitionResult,
  PartitionStrategy,
  UniformPartitionOptions,
} from "./partition.ts";
export {
  evaluatePartition,
  FixedPartition,
  LoadBalancedPartition,
  UniformPartition,
  validatePartition,
} from "./partition.ts";
export type {
  ActivationCheckpointOptions,
  CheckpointSegment,
  ChunkCheckpointPlan,
  RecomputePolicy,
} from "./checkpoint.ts";
export { ActivationCheckpointConfig, DEFAULT_EXPENSIVE_KINDS } from "./checkpoint.ts";
export type { ActionCosts, CostValue, SimulateOptions, SimulationResult } from "./simulate.ts";
export { simulate } from "./simulate.ts";
export type { GenerateOptions, ScheduleName } from "./generate.ts";
export { estimateBubbleFraction, generateSchedule, SCHEDULE_NAMES } from "./generate.ts";
export type { ScheduleProblem, ScheduleProblemKind, ScheduleStall } from "./validate.ts";
export { checkSchedule, ScheduleDeadlockError, validateSchedule } from "./validate.ts";
export type { CostSource, ProfileOptions } from "./layer_costs.ts";
export { layerCosts, profileLayerCosts } from "./layer_costs.ts";
export { CheckpointedChunk } from "./checkpointed_chunk.ts";
export type { CommBackend, ControlHandler, ControlMessage, SendOptions } from "./comm/backend.ts";
export { CommAbortedError } from "./comm/backend.ts";
export type { TagFields, TagSpace } from "./comm/tag.ts";
export { makeTag } from "./comm/tag.ts";
export { InProcessBackend } from "./comm/in_process.ts";
export type { ConnectOptions, WorkerBackendInit } from "./comm/worker_backend.ts";
export { createPortMesh, WorkerBackend } from "./comm/worker_backend.ts";
export type { MpiBackendOptions } from "./comm/mpi_backend.ts";
export { MpiBackend, MpiSetupError } from "./comm/mpi_backend.ts";
export type { LinkModel, LinkSample, MeasureLinkOptions } from "./comm/link_model.ts";
export { linkFromSamples, measureLink, messageDelay } from "./comm/link_model.ts";
export type {
  PendingOutput,
  StageContext,
  StageExecutor,
  StageExecutorFactory,
  StageExecutorInit,
  StageOutput,
} from "./runtime/stage_executor.ts";
export type { SyntheticCosts, SyntheticExecutorOptions } from "./runtime/synthetic_executor.ts";
export { createSyntheticExecutor, syntheticCosts } from "./runtime/synthetic_executor.ts";
export type {
  InProcessRunOptions,
  InProcessRunResult,
  RankRunOptions,
  RankRunResult,
  RankState,
} from "./runtime/stage_runner.ts";
export { runPipelineInProcess, runRank } from "./runtime/stage_runner.ts";
export type { SummarizeTimelineOptions, TimelineSummary } from "./runtime/timeline_summary.ts";
export { summarizeTimeline } from "./runtime/timeline_summary.ts";
export type { PipelineFailure, PipelineFailureKind } from "./runtime/pipeline_worker_error.ts";
export { PipelineWorkerError } from "./runtime/pipeline_worker_error.ts";
export type {
  ExecutorChoice,
  PipelineRunOptions,
  PipelineRunResult,
  PipelineWorkerPoolOptions,
} from "./runtime/worker_pool.ts";
export { liveWorkerCount, PipelineWorkerPool } from "./runtime/worker_pool.ts";
export type { AdamWSpec, OptimizerSpec, SGDSpec } from "./optimizer_spec.ts";
export { checkOptimizerSpec, createOptimizer } from "./optimizer_spec.ts";
export type {
  ModelStageOptions,
  ModelStagePayload,
  ModelStageReport,
  ParameterStats,
  PipelineLoss,
  PredictArgs,
} from "./runtime/model_stage_executor.ts";
export { createModelStageExecutor } from "./runtime/model_stage_executor.ts";
export type {
  FaultInjection,
  PipelineParallelModelOptions,
  Prediction,
  RankInfo,
  StepResult,
  TrainingBatch,
  TrainResult,
} from "./pipeline_parallel_model.ts";
export { PipelineParallelModel } from "./pipeline_parallel_model.ts";
