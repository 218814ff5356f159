/**
 * Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism"):
 * chunks placed in a loop (chunk c of rank r is stage c·p + r); each rank
 * runs all micro-batches through its first chunk, then its second, and so
 * on, then the backwards chunk by chunk in reverse, newest micro-batch
 * first, as PyTorch's `ScheduleLoopedBFS` does.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, loopPlacement, makeSchedule } from "./_common.ts";

/** Looped BFS with `stagesPerRank` chunks per rank; arguments pre-checked. */
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
