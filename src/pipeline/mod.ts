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
