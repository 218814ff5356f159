/**
 * Conveyor's pipeline runtime, for those who build on it rather than train
 * with it: the transports between ranks (`CommBackend`, in-process and
 * worker), the stage-executor contract, the rank loop (`runRank`), rank
 * groups (every rank in this thread, one Deno worker per rank, or one
 * process per rank under MPI) with typed calls, and the model stage
 * executor that `PipelineParallelModel` runs on each rank. A training script needs none of this: see the main
 * entry point, `@conveyor/core`.
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core";
 * import { runPipelineInProcess } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * const r = await runPipelineInProcess(generateSchedule("1f1b", { ranks: 2, microBatches: 4 }), {
 *   createExecutor: createSyntheticExecutor,
 *   executorOptions: { ms: 0 },
 * });
 * console.log(r.events.length); // 16
 * ```
 *
 * @module
 */

export { generateSchedule, SCHEDULE_NAMES, SCHEDULES } from "./src/pipeline/schedule/generate.ts";
// The main entry point's types that this one's API names (so that its
// documentation stands on its own).
export type {
  AdamWParams,
  Backend,
  BackendKind,
  BackendName,
  BinaryOp,
  CrossEntropyResult,
  InvalidIndex,
  LayerNormResult,
  LayerNormStats,
  MatmulConfig,
  MemoryStats,
  RmsNormResult,
  SGDParams,
  Shape,
  Tensor,
  UnaryGradOp,
  UnaryOp,
} from "./src/tensor/mod.ts";
export type {
  AdamWOptions,
  AdamWSpec,
  ConstantLrSpec,
  CosineLrSpec,
  LayerSpec,
  LinearLrSpec,
  LrScheduleSpec,
  OptimizerSpec,
  Parameter,
  SequentialLrSpec,
  SGDOptions,
  SGDSpec,
  StepLrSpec,
  WarmupCosineLrSpec,
} from "./nn.ts";
export type {
  Action,
  ActionCosts,
  ActionKind,
  ActivationCheckpointOptions,
  BubbleInputs,
  CostValue,
  GenerateOptions,
  PipelineLoss,
  RankActions,
  RankInfo,
  RecomputePolicy,
  Schedule,
  ScheduleDefinition,
  ScheduleInputs,
  ScheduleName,
  ScheduleShape,
  StageCosts,
  TimedEvent,
} from "./mod.ts";
export type { LinkModel, TimelineSummary } from "./analysis.ts";
export type { FaultInjection, FaultKind } from "./src/pipeline/runtime/fault_injection.ts";
export type { CheckedFault } from "./src/pipeline/runtime/fault_injection.ts";
export type {
  CommBackend,
  ControlHandler,
  ControlMessage,
  LostRank,
  SendOptions,
} from "./src/pipeline/comm/backend.ts";
export { CommAbortedError } from "./src/pipeline/comm/backend.ts";
export type { TagFields, TagSpace } from "./src/pipeline/runtime/tag.ts";
export { makeTag } from "./src/pipeline/runtime/tag.ts";
export { InProcessBackend } from "./src/pipeline/comm/in_process.ts";
export type { ConnectOptions, WorkerBackendInit } from "./src/pipeline/comm/worker_backend.ts";
export { createPortMesh, WorkerBackend } from "./src/pipeline/comm/worker_backend.ts";
export type { MpiBackendOptions } from "./src/pipeline/comm/mpi_backend.ts";
export { MpiBackend, MpiSetupError } from "./src/pipeline/comm/mpi_backend.ts";
export type { MeasureLinkOptions } from "./src/pipeline/comm/link_model.ts";
export { measureLink } from "./src/pipeline/comm/link_model.ts";
export type {
  CallHandlers,
  CallMap,
  DeviceSpan,
  NoCalls,
  PendingCheck,
  PendingOutput,
  RankExecutor,
  RankExecutorFactory,
  RankExecutorInit,
  StageContext,
  StageOutput,
  StepCheck,
  StepResultOf,
} from "./src/pipeline/runtime/rank_executor.ts";
export type {
  RankRunOptions,
  RankRunResult,
  RankState,
} from "./src/pipeline/runtime/rank_interpreter.ts";
export type { GradNorm, RolledBack } from "./src/pipeline/runtime/step_validation.ts";
export { runRank } from "./src/pipeline/runtime/rank_interpreter.ts";
export type {
  GradientSyncOptions,
  GridPlace,
  PendingAverage,
} from "./src/pipeline/runtime/gradient_sync.ts";
export {
  DEFAULT_BUCKET_BYTES,
  GradientSync,
  gridPlace,
  ReplicaComm,
} from "./src/pipeline/runtime/gradient_sync.ts";
export type {
  ReplicaPeers,
  ShardedExecutor,
  ShardRange,
} from "./src/pipeline/runtime/optimizer_sharding.ts";
export {
  reduceScatterAverage,
  ShardedSteps,
  shardRange,
} from "./src/pipeline/runtime/optimizer_sharding.ts";
export type {
  RankGroup,
  RankGroupKind,
  RankGroupRunOptions,
  RankGroupRunResult,
} from "./src/pipeline/runtime/rank_group.ts";
export type {
  InProcessRankGroupOptions,
  InProcessRunOptions,
  InProcessRunResult,
} from "./src/pipeline/runtime/in_process_rank_group.ts";
export {
  InProcessRankGroup,
  runPipelineInProcess,
} from "./src/pipeline/runtime/in_process_rank_group.ts";
export type {
  ExecutorChoice,
  WorkerRankGroupOptions,
} from "./src/pipeline/runtime/worker_rank_group.ts";
export { WorkerRankGroup } from "./src/pipeline/runtime/worker_rank_group.ts";
export { SubprocessRankGroup } from "./src/pipeline/runtime/subprocess_rank_group.ts";
export type {
  NonFinitePolicy,
  RunPolicy,
  RunPolicyOptions,
} from "./src/pipeline/runtime/run_policy.ts";
export { checkRunPolicy } from "./src/pipeline/runtime/run_policy.ts";
export type { SpmdRankGroupOptions } from "./src/pipeline/runtime/spmd_rank_group.ts";
export { SpmdRankGroup } from "./src/pipeline/runtime/spmd_rank_group.ts";
export type {
  PipelineFailureKind,
  PipelineRankErrorInit,
} from "./src/pipeline/runtime/pipeline_rank_error.ts";
export { PipelineRankError } from "./src/pipeline/runtime/pipeline_rank_error.ts";
export type {
  ModelStageOptions,
  ModelStagePayload,
  ModelStageReport,
} from "./src/pipeline/model/model_rank_executor.ts";
export type { TiedLink } from "./src/pipeline/model/stage_options.ts";
export {
  createModelRankExecutor,
  MODEL_RANK_EXECUTOR_URL,
  ModelRankExecutor,
} from "./src/pipeline/model/model_rank_executor.ts";
export type {
  DecodeArgs,
  ModelStageCalls,
  PredictArgs,
  TensorData,
} from "./src/pipeline/model/stage_calls.ts";
