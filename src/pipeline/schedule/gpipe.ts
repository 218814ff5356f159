/**
 * GPipe (Huang et al. 2019): every rank runs all forwards, then all
 * backwards. Peak activations m on every rank.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, bubbleRatio, loopPlacement, makeSchedule, oneStagePerRank } from "./_common.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** GPipe over `ranks` ranks (one stage each) and `microBatches` micro-batches; arguments pre-checked. */
export function gpipe(ranks: number, microBatches: number): Schedule {
  const actions: Action[][] = [];
  for (let r = 0; r < ranks; r++) {
    const list: Action[] = [];
    for (let mb = 0; mb < microBatches; mb++) list.push(act("F", r, mb));
    for (let mb = 0; mb < microBatches; mb++) list.push(act("B", r, mb));
    actions.push(list);
  }
  return makeSchedule("gpipe", ranks, microBatches, 1, loopPlacement(ranks, 1), actions);
}

/**
 * The `gpipe` entry of the schedule table: every rank runs all forwards, then all backwards (Huang et al. 2019).
 *
 * @example
 * ```ts
 * import { GPIPE } from "./gpipe.ts";
 * console.log(GPIPE.name, GPIPE.defaultStagesPerRank); // gpipe 1
 * ```
 */
export const GPIPE: ScheduleDefinition<"gpipe"> = {
  name: "gpipe",
  description: "every rank runs all forwards, then all backwards (Huang et al. 2019)",
  defaultStagesPerRank: 1,
  checkShape: oneStagePerRank("gpipe"),
  generate: ({ ranks, microBatches }) => gpipe(ranks, microBatches),
  bubble: ({ ranks: p, microBatches: m, f, b }) => bubbleRatio((p - 1) * (f + b), m * (f + b)),
};
