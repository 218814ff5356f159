// Helpers shared by the schedule generators. Not exported from the package.

import type { Action, ActionKind } from "./action.ts";
import type { Schedule } from "./schedule.ts";

/** Shorthand for an action. */
export function act(kind: ActionKind, stage: number, microBatch: number): Action {
  return { kind, stage, microBatch };
}

/** Loop placement: chunk c of rank r is stage c·ranks + r. */
export function loopPlacement(ranks: number, stagesPerRank: number): number[] {
  return Array.from({ length: ranks * stagesPerRank }, (_, s) => s % ranks);
}

/** V placement (2 chunks per rank): rank r holds stages r and 2·ranks−1−r. */
export function vPlacement(ranks: number): number[] {
  return Array.from({ length: 2 * ranks }, (_, s) => (s < ranks ? s : 2 * ranks - 1 - s));
}

/** Builds the record. */
export function makeSchedule(
  name: string,
  ranks: number,
  microBatches: number,
  stagesPerRank: number,
  stageToRank: readonly number[],
  actions: readonly (readonly Action[])[],
): Schedule {
  return { name, ranks, microBatches, stagesPerRank, stageToRank, actions };
}
