/**
 * 1F1B (PipeDream-Flush, Narayanan et al. 2021): rank r runs
 * min(p−1−r, m) warm-up forwards, then alternates one forward and one full
 * backward, then drains the remaining backwards. Peak activations min(p, m)
 * on rank 0.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, bubbleRatio, loopPlacement, makeSchedule, oneStagePerRank } from "./_common.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** 1F1B over `ranks` ranks (one stage each); arguments pre-checked. */
export function oneFOneB(ranks: number, microBatches: number): Schedule {
  const actions: Action[][] = [];
  for (let r = 0; r < ranks; r++) {
    const warmup = Math.min(ranks - 1 - r, microBatches);
    const list: Action[] = [];
    for (let mb = 0; mb < warmup; mb++) list.push(act("F", r, mb));
    for (let i = 0; i < microBatches - warmup; i++) {
      list.push(act("F", r, warmup + i));
      list.push(act("B", r, i));
    }
    for (let mb = microBatches - warmup; mb < microBatches; mb++) list.push(act("B", r, mb));
    actions.push(list);
  }
  return makeSchedule("1f1b", ranks, microBatches, 1, loopPlacement(ranks, 1), actions);
}

/**
 * The `1f1b` entry of the schedule table: one forward, one backward in the steady state (PipeDream-Flush).
 *
 * @example
 * ```ts
 * import { ONE_F_ONE_B } from "./one_f_one_b.ts";
 * console.log(ONE_F_ONE_B.name, ONE_F_ONE_B.defaultStagesPerRank); // 1f1b 1
 * ```
 */
export const ONE_F_ONE_B: ScheduleDefinition<"1f1b"> = {
  name: "1f1b",
  description: "one forward, one backward in the steady state (PipeDream-Flush)",
  defaultStagesPerRank: 1,
  checkShape: oneStagePerRank("1f1b"),
  generate: ({ ranks, microBatches }) => oneFOneB(ranks, microBatches),
  bubble: ({ ranks: p, microBatches: m, f, b }) => bubbleRatio((p - 1) * (f + b), m * (f + b)),
};
