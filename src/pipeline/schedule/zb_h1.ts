/**
 * ZB-H1 (Qi et al. 2024): 1F1B with the backward split into an
 * input-gradient pass I and a weight-gradient pass W. Rank r lets its W
 * passes trail its I passes by r micro-batches and runs the r postponed W
 * passes at the end, so they fill the cool-down bubble. Same peak memory as
 * 1F1B; with T_F = T_I = T_W and m ≥ p the bubble is (p−1)/(3m+p−1).
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, bubbleRatio, loopPlacement, makeSchedule, oneStagePerRank } from "./_common.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** ZB-H1 over `ranks` ranks (one stage each); arguments pre-checked. */
export function zbH1(ranks: number, microBatches: number): Schedule {
  const m = microBatches;
  const actions: Action[][] = [];
  for (let r = 0; r < ranks; r++) {
    const warmup = Math.min(ranks - 1 - r, m);
    const list: Action[] = [];
    let w = 0;
    // After the k-th I pass, run W of micro-batch k − r.
    const afterInput = (k: number) => {
      if (k - r >= 0) list.push(act("W", r, w++));
    };
    for (let mb = 0; mb < warmup; mb++) list.push(act("F", r, mb));
    for (let k = 0; k < m - warmup; k++) {
      list.push(act("F", r, warmup + k));
      list.push(act("I", r, k));
      afterInput(k);
    }
    for (let k = m - warmup; k < m; k++) {
      list.push(act("I", r, k));
      afterInput(k);
    }
    while (w < m) list.push(act("W", r, w++));
    actions.push(list);
  }
  return makeSchedule("zb-h1", ranks, m, 1, loopPlacement(ranks, 1), actions);
}

/**
 * The `zb-h1` entry of the schedule table: 1F1B with a split backward whose W passes fill the cool-down (Zero Bubble).
 *
 * @example
 * ```ts
 * import { ZB_H1 } from "./zb_h1.ts";
 * console.log(ZB_H1.name, ZB_H1.defaultStagesPerRank); // zb-h1 1
 * ```
 */
export const ZB_H1: ScheduleDefinition<"zb-h1"> = {
  name: "zb-h1",
  description: "1F1B with a split backward whose W passes fill the cool-down (Zero Bubble)",
  defaultStagesPerRank: 1,
  checkShape: oneStagePerRank("zb-h1"),
  generate: ({ ranks, microBatches }) => zbH1(ranks, microBatches),
  // Exact for m >= p.
  bubble: ({ ranks: p, microBatches: m, f, i, w }) =>
    bubbleRatio(Math.max(0, (p - 1) * (f + i - w)), m * (f + i + w)),
};
