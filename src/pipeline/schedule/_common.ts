// Helpers shared by the schedule generators. Not exported from the package.

import type { Action, ActionKind } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import type { ScheduleShape } from "./schedule_registry.ts";

/** Shorthand for an action. */
export function act(kind: ActionKind, stage: number, microBatch: number): Action {
  return { kind, stage, microBatch };
}

/** Loop placement: the c-th stage of rank r is global stage c·ranks + r. */
export function loopPlacement(ranks: number, stagesPerRank: number): number[] {
  return Array.from({ length: ranks * stagesPerRank }, (_, s) => s % ranks);
}

/** V placement (2 stages per rank): rank r holds stages r and 2·ranks−1−r. */
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

/** The stages-per-rank rule of a schedule that places one stage per rank. */
export function oneStagePerRank(name: string): (shape: ScheduleShape) => void {
  return ({ stagesPerRank: V }) => {
    if (V !== 1) {
      throw new RangeError(`${name} places one stage per rank, got stagesPerRank ${V}`);
    }
  };
}

/** `idle / (idle + busy)`, 0 when both are 0. */
export function bubbleRatio(idle: number, busy: number): number {
  return idle + busy > 0 ? idle / (idle + busy) : 0;
}

/** The stages-per-rank rule of a schedule that places exactly two stages per rank (a V). */
export function twoStagesPerRank(name: string): (shape: ScheduleShape) => void {
  return ({ stagesPerRank: V }) => {
    if (V !== 2) {
      throw new RangeError(`${name} places exactly 2 stages per rank, got stagesPerRank ${V}`);
    }
  };
}
