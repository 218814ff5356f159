/**
 * Pipeline schedules, validation, simulation, rendering, partitioning,
 * checkpointing and the worker runtime.
 *
 * @module
 */

export type { Action, ActionKind, RankActions } from "./action.ts";
export { formatAction, parseAction } from "./action.ts";
export type { Schedule, TimedEvent } from "./schedule.ts";
