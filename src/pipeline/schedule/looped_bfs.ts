/**
 * Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism"):
 * stages placed in a loop (the c-th stage of rank r is global stage c·p + r); each rank
 * runs all micro-batches through its first stage, then its second, and so
 * on, then the backwards stage by stage in reverse, newest micro-batch
 * first, as PyTorch's `ScheduleLoopedBFS` does.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, loopPlacement, makeSchedule } from "./_common.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** Looped BFS with `stagesPerRank` stages per rank; arguments pre-checked. */
export function loopedBfs(ranks: number, microBatches: number, stagesPerRank: number): Schedule {
  const actions: Action[][] = [];
  for (let r = 0; r < ranks; r++) {
    const list: Action[] = [];
    for (let c = 0; c < stagesPerRank; c++) {
      for (let mb = 0; mb < microBatches; mb++) list.push(act("F", c * ranks + r, mb));
    }
    for (let c = stagesPerRank - 1; c >= 0; c--) {
      for (let mb = microBatches - 1; mb >= 0; mb--) list.push(act("B", c * ranks + r, mb));
    }
    actions.push(list);
  }
  return makeSchedule(
    "looped-bfs",
    ranks,
    microBatches,
    stagesPerRank,
    loopPlacement(ranks, stagesPerRank),
    actions,
  );
}

/**
 * The `looped-bfs` entry of the schedule table: all micro-batches through each looped stage in turn (breadth first).
 *
 * @example
 * ```ts
 * import { LOOPED_BFS } from "./looped_bfs.ts";
 * console.log(LOOPED_BFS.name, LOOPED_BFS.defaultStagesPerRank); // looped-bfs 2
 * ```
 */
export const LOOPED_BFS: ScheduleDefinition<"looped-bfs"> = {
  name: "looped-bfs",
  description: "all micro-batches through each looped stage in turn (breadth first)",
  defaultStagesPerRank: 2,
  checkShape: () => {},
  generate: ({ ranks, microBatches, stagesPerRank }) =>
    loopedBfs(ranks, microBatches, stagesPerRank),
  bubble: ({ ranks: p, microBatches: m, stagesPerRank: V }) =>
    1 - (V * m) / ((V - 1) * Math.max(m, p) + m + p - 1),
};
