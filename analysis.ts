/**
 * Inspect and plan a pipeline: check a schedule (every dependency met, no
 * deadlock, each problem named), read and write schedules as CSV and
 * actions as text (`1F3`), estimate a schedule's bubble, summarize a
 * timeline, export it as a Chrome trace, cut layers into stages
 * (partition strategies for `PipelineParallelModel`'s `partition` option),
 * profile layers' costs, passes and memory, and predict a candidate's step
 * time and bytes per rank (what `cli.ts advise` and
 * {@linkcode adviseSchedule} rank). A training script needs none of this:
 * `generateSchedule`, `simulate` and the pictures are in `@conveyor/core`.
 *
 * @example Check schedules: a generated one passes, a broken one is named
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import {
 *   checkSchedule,
 *   parseAction,
 *   scheduleFromCsv,
 *   scheduleToCsv,
 * } from "@conveyor/core/analysis";
 * const s = generateSchedule("gpipe", { ranks: 2, microBatches: 2 });
 * assert.deepEqual(checkSchedule(s), []);
 * assert.deepEqual(scheduleFromCsv(scheduleToCsv(s.actions)), s.actions);
 * const noForward = { ...s, actions: [s.actions[0].filter((a) => a.kind !== "F"), s.actions[1]] };
 * assert.ok(checkSchedule(noForward).length > 0); // rank 1 waits for inputs rank 0 never sends
 * assert.deepEqual(parseAction("1F3"), { kind: "F", stage: 1, microBatch: 3 });
 * ```
 *
 * @module
 */

export type {
  ScheduleProblem,
  ScheduleProblemKind,
} from "./src/pipeline/analysis/schedule_problem.ts";
export type { ScheduleStall } from "./src/pipeline/analysis/validate.ts";
export {
  checkSchedule,
  ScheduleDeadlockError,
  validateSchedule,
} from "./src/pipeline/analysis/validate.ts";
export { formatAction, parseAction } from "./src/pipeline/schedule/action.ts";
export { scheduleFromCsv, scheduleToCsv } from "./src/pipeline/schedule/schedule_csv.ts";
export { estimateBubbleFraction } from "./src/pipeline/analysis/bubble_estimate.ts";
export {
  type RankBytes,
  rankBytes,
  type RankBytesOptions,
} from "./src/pipeline/analysis/rank_bytes.ts";
export type {
  SummarizeTimelineOptions,
  TimelineSummary,
} from "./src/pipeline/analysis/timeline_summary.ts";
export { summarizeTimeline } from "./src/pipeline/analysis/timeline_summary.ts";
export type {
  ChromeTrace,
  ChromeTraceEvent,
  ChromeTraceOptions,
} from "./src/pipeline/render/chrome_trace.ts";
export { toChromeTrace } from "./src/pipeline/render/chrome_trace.ts";
export type { LinkModel, LinkSample } from "./src/pipeline/comm/link_model.ts";
export { linkFromSamples, messageDelay } from "./src/pipeline/comm/link_model.ts";
export type {
  CostedLayer,
  PartitionInput,
  PartitionOptions,
  PartitionResult,
  PartitionStrategy,
  UniformPartitionOptions,
} from "./src/pipeline/partition/partition.ts";
export {
  evaluatePartition,
  FixedPartition,
  LoadBalancedPartition,
  UniformPartition,
  validatePartition,
} from "./src/pipeline/partition/partition.ts";
export type { CostSource, ProfileOptions } from "./src/pipeline/partition/layer_costs.ts";
export { layerCosts, profileLayerCosts } from "./src/pipeline/partition/layer_costs.ts";
export type {
  LayerPasses,
  PassProfile,
  PassProfileOptions,
  PassTiming,
} from "./src/pipeline/partition/layer_passes.ts";
export {
  passTiming,
  profileLayerPasses,
  relativeSpread,
} from "./src/pipeline/partition/layer_passes.ts";
export type {
  LayerSummary,
  ModelSummary,
  StageSummary,
  SummaryOptions,
} from "./src/pipeline/partition/summary.ts";
export { summary } from "./src/pipeline/partition/summary.ts";
export type { StageMemory, StageMemoryOptions } from "./src/pipeline/partition/stage_memory.ts";
export { profileStageMemory } from "./src/pipeline/partition/stage_memory.ts";
export { CheckpointedStage } from "./src/pipeline/checkpoint/checkpointed_stage.ts";
export { DEFAULT_EXPENSIVE_KINDS } from "./src/pipeline/checkpoint/checkpoint.ts";
export type { LayerBytes, RankMemory } from "./src/advise/rank_memory.ts";
export { activationPeaks, rankMemory } from "./src/advise/rank_memory.ts";
export type {
  CostFactors,
  LayerTimes,
  PlannedCandidate,
  PredictOptions,
  RuntimeOverheads,
  StageCostTable,
  StepPrediction,
  TogetherTimes,
} from "./src/advise/step_prediction.ts";
export {
  layerLoads,
  planCandidate,
  predictStep,
  rankBalancedBoundaries,
  stageCosts,
} from "./src/advise/step_prediction.ts";
export type {
  AdviceCalibration,
  CalibratedKind,
  CalibrationCheck,
  CalibrationFit,
  CalibrationRun,
  KindFactor,
  StepCheckRun,
} from "./src/advise/calibration.ts";
export { fitCalibration, fitStepOverhead } from "./src/advise/calibration.ts";
export type { AdviceCandidate, AdviceJson, AdviceRow } from "./src/advise/advice_table.ts";
export {
  adviceJson,
  distinctRuns,
  formatAdviceTable,
  formatBytes,
  markTies,
  pipelineVerdict,
  rankCandidates,
} from "./src/advise/advice_table.ts";
export type {
  Advice,
  AdviceProfile,
  AdviseModule,
  AdviseOptions,
  SkippedCandidate,
} from "./src/advise/advise.ts";
export { adviseSchedule } from "./src/advise/advise.ts";
// The other entry points' types that this one's API names.
export type { AdamWOptions } from "./src/nn/adamw.ts";
export type {
  BackwardOptions,
  ForwardOptions,
  InputGrad,
  Layer,
  LayerCost,
  LayerSpec,
  Parameter,
  StateKey,
} from "./src/nn/layer.ts";
export type {
  ConstantLrSpec,
  CosineLrSpec,
  LinearLrSpec,
  LrScheduleSpec,
  SequentialLrSpec,
  StepLrSpec,
  WarmupCosineLrSpec,
} from "./src/nn/lr_schedule.ts";
export type { AdamWSpec, OptimizerSpec, SGDSpec } from "./src/nn/optimizer_spec.ts";
export { Sequential } from "./src/nn/sequential.ts";
export type { SGDOptions } from "./src/nn/sgd.ts";
export {
  ActivationCheckpointConfig,
  type CheckpointSegment,
  type RecomputePolicy,
  type StageCheckpointPlan,
} from "./src/pipeline/checkpoint/checkpoint.ts";
export type { TrainingBatch } from "./src/pipeline/model/batch.ts";
export type { PipelineLoss } from "./src/pipeline/model/stage_options.ts";
export type { Action, ActionKind, RankActions } from "./src/pipeline/schedule/action.ts";
export type { ActionCosts, CostValue } from "./src/pipeline/schedule/costs.ts";
export { SCHEDULE_NAMES, type ScheduleName, SCHEDULES } from "./src/pipeline/schedule/generate.ts";
export type {
  BubbleInputs,
  ScheduleDefinition,
  ScheduleInputs,
  ScheduleShape,
} from "./src/pipeline/schedule/schedule_registry.ts";
export type { StageCosts } from "./src/pipeline/schedule/costs.ts";
export type { NonFinitePolicy } from "./src/pipeline/runtime/run_policy.ts";
export type { Schedule, TimedEvent } from "./src/pipeline/schedule/schedule.ts";
export type { BinaryOp, UnaryGradOp, UnaryOp } from "./src/tensor/_elementwise_ops.ts";
export type {
  AdamWParams,
  Backend,
  BackendName,
  CrossEntropyResult,
  InvalidIndex,
  LayerNormResult,
  LayerNormStats,
  MemoryStats,
  RmsNormResult,
  SGDParams,
  Shape,
} from "./src/tensor/backend.ts";
export type { BackendKind } from "./src/tensor/create_backend.ts";
export { Tensor } from "./src/tensor/tensor.ts";
export { ringAllReduceTime } from "./src/pipeline/analysis/all_reduce.ts";
export type {
  AllReduceLink,
  AllReduceSpan,
  DataParallelOptions,
} from "./src/pipeline/analysis/all_reduce.ts";
