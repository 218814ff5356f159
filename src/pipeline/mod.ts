/**
 * Pipeline schedules, validation, simulation, rendering, partitioning,
 * checkpointing and the worker runtime.
 *
 * @module
 */

export type { Action, ActionKind, RankActions } from "./schedule/action.ts";
export { formatAction, parseAction } from "./schedule/action.ts";
export type { Schedule, TimedEvent } from "./schedule/schedule.ts";
export type { AsciiOptions } from "./render/render_ascii.ts";
export { renderAscii } from "./render/render_ascii.ts";
export type { SvgOptions } from "./render/render_svg.ts";
export { renderSvg } from "./render/render_svg.ts";
export type { ChromeTrace, ChromeTraceEvent, ChromeTraceOptions } from "./render/chrome_trace.ts";
export { toChromeTrace } from "./render/chrome_trace.ts";
export { scheduleFromCsv, scheduleToCsv } from "./schedule/schedule_csv.ts";
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
export type {
  ActivationCheckpointOptions,
  CheckpointSegment,
  ChunkCheckpointPlan,
  RecomputePolicy,
} from "./checkpoint/checkpoint.ts";
export { ActivationCheckpointConfig, DEFAULT_EXPENSIVE_KINDS } from "./checkpoint/checkpoint.ts";
export type { ActionCosts, CostValue, SimulateOptions, SimulationResult } from "./analysis/simulate.ts";
export { simulate } from "./analysis/simulate.ts";
export type { GenerateOptions, ScheduleName } from "./schedule/generate.ts";
export { estimateBubbleFraction, generateSchedule, SCHEDULE_NAMES } from "./schedule/generate.ts";
export type { ScheduleProblem, ScheduleProblemKind, ScheduleStall } from "./analysis/validate.ts";
export { checkSchedule, ScheduleDeadlockError, validateSchedule } from "./analysis/validate.ts";
export type { CostSource, ProfileOptions } from "./partition/layer_costs.ts";
export { layerCosts, profileLayerCosts } from "./partition/layer_costs.ts";
export { CheckpointedChunk } from "./checkpoint/checkpointed_chunk.ts";
export type { CommBackend, ControlHandler, ControlMessage, SendOptions } from "./comm/backend.ts";
export { CommAbortedError } from "./comm/backend.ts";
export type { TagFields, TagSpace } from "./comm/tag.ts";
export { makeTag } from "./comm/tag.ts";
export { InProcessBackend } from "./comm/in_process.ts";
export type { ConnectOptions, WorkerBackendInit } from "./comm/worker_backend.ts";
export { createPortMesh, WorkerBackend } from "./comm/worker_backend.ts";
export type {
  PendingOutput,
  StageContext,
  StageExecutor,
  StageExecutorFactory,
  StageExecutorInit,
  StageOutput,
} from "./runtime/stage_executor.ts";
export type { SyntheticCosts, SyntheticExecutorOptions } from "./testing/synthetic_executor.ts";
export { createSyntheticExecutor, syntheticCosts } from "./testing/synthetic_executor.ts";
export type {
  InProcessRunOptions,
  InProcessRunResult,
  RankRunOptions,
  RankRunResult,
  RankState,
} from "./runtime/stage_runner.ts";
export { runPipelineInProcess, runRank } from "./runtime/stage_runner.ts";
export type { SummarizeTimelineOptions, TimelineSummary } from "./analysis/timeline_summary.ts";
export { summarizeTimeline } from "./analysis/timeline_summary.ts";
export type { PipelineFailure, PipelineFailureKind } from "./runtime/pipeline_worker_error.ts";
export { PipelineWorkerError } from "./runtime/pipeline_worker_error.ts";
export type {
  ExecutorChoice,
  PipelineRunOptions,
  PipelineRunResult,
  PipelineWorkerPoolOptions,
} from "./runtime/worker_pool.ts";
export { liveWorkerCount, PipelineWorkerPool } from "./runtime/worker_pool.ts";
export type { AdamWSpec, OptimizerSpec, SGDSpec } from "../nn/optimizer_spec.ts";
export { checkOptimizerSpec, createOptimizer } from "../nn/optimizer_spec.ts";
export type {
  ModelStageOptions,
  ModelStagePayload,
  ModelStageReport,
  ParameterStats,
  PipelineLoss,
  PredictArgs,
} from "./model/model_stage_executor.ts";
export { createModelStageExecutor } from "./model/model_stage_executor.ts";
export type {
  FaultInjection,
  PipelineParallelModelOptions,
  Prediction,
  RankInfo,
  StepResult,
  TrainingBatch,
  TrainResult,
} from "./model/pipeline_parallel_model.ts";
export { PipelineParallelModel } from "./model/pipeline_parallel_model.ts";
