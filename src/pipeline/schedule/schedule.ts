/**
 * The `Schedule` record that generators return and that validation,
 * simulation, rendering and execution all consume, and the timed events a
 * simulation (or a measured run) produces.
 *
 * @module
 */

import type { Action, RankActions } from "./action.ts";

/**
 * A pipeline schedule as data.
 *
 * @example
 * ```ts
 * import type { Schedule } from "@conveyor/core";
 * const s: Schedule = {
 *   name: "gpipe",
 *   ranks: 1,
 *   microBatches: 1,
 *   stagesPerRank: 1,
 *   stageToRank: [0],
 *   actions: [[{ kind: "F", stage: 0, microBatch: 0 }, { kind: "B", stage: 0, microBatch: 0 }]],
 * };
 * console.log(s.actions[0].length);
 * ```
 */
export interface Schedule {
  /** Schedule name as the CLI spells it, e.g. `"zb-h1"`. */
  readonly name: string;
  /** Number of pipeline ranks p. */
  readonly ranks: number;
  /** Number of micro-batches m. */
  readonly microBatches: number;
  /** Model stages per rank V (1 for GPipe, 1F1B, ZB-H1, ZB-H2; 2 for ZB-V). */
  readonly stagesPerRank: number;
  /** Placement: `stageToRank[s]` is the rank that holds global stage s. */
  readonly stageToRank: readonly number[];
  /** For each rank, its actions in execution order. */
  readonly actions: RankActions;
}

/** One timed action, from the simulator or from a measured run. */
export interface TimedEvent {
  /** Rank that ran the action. */
  readonly rank: number;
  /** The action. */
  readonly action: Action;
  /** Iteration (training step) index, 0-based. */
  readonly iteration: number;
  /** Start time (simulated units or milliseconds). */
  readonly start: number;
  /** End time, same unit as `start`. */
  readonly end: number;
}
