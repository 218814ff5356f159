/**
 * ZB-V (Qi et al. 2024, section 6), built as PyTorch's
 * `ScheduleZBVZeroBubble` builds it: 2 stages per rank in a V (rank r holds
 * stages r and 2p−1−r, so the forward runs down ranks 0..p−1 and back up).
 * Rank r warms up with 2(p−r)−1 forwards of its first stage, r pairs of
 * forwards (second stage, first stage) and p−r groups F, I, W of its second
 * stage; the steady state runs groups F, I, W on each stage in turn; the
 * cool-down runs input-gradient passes first and lets weight-gradient passes
 * fill the gaps. Fewer than 2p−1 micro-batches: built for 2p−1, the extra
 * ones dropped. At T_F = T_I = T_W and m ≥ 2p−1 one iteration's bubble is
 * (p−1)/(6m+p−1), the ramp-up bound (rank r waits for r half-stage
 * forwards); back-to-back iterations interlock to zero.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, bubbleRatio, makeSchedule, twoStagesPerRank, vPlacement } from "./_common.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** ZB-V over `ranks` ranks (2 stages each); arguments pre-checked. */
export function zbV(ranks: number, microBatches: number): Schedule {
  const p = ranks;
  const n = Math.max(2 * p - 1, microBatches);
  const actions: Action[][] = [];
  for (let r = 0; r < p; r++) {
    const c0 = r;
    const c1 = 2 * p - 1 - r;
    let f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    const list: Action[] = [];
    const F0 = () => list.push(act("F", c0, f0++));
    const F1 = () => list.push(act("F", c1, f1++));
    for (let i = 0; i < 2 * (p - r) - 1; i++) F0();
    for (let i = 0; i < r; i++) {
      F1();
      F0();
    }
    for (let i = 0; i < p - r; i++) {
      F1();
      list.push(act("I", c1, b1), act("W", c1, b1));
      b1++;
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) F0();
      list.push(act("I", c0, b0), act("W", c0, b0));
      b0++;
      F1();
      list.push(act("I", c1, b1), act("W", c1, b1));
      b1++;
    }
    let w0 = b0, w1 = b1;
    for (let i = 0; i < r; i++) {
      list.push(act("I", c0, b0++), act("I", c1, b1++));
    }
    for (let i = 0; i < p - r; i++) {
      list.push(act("I", c0, b0++), act("W", c0, w0++));
    }
    while (w1 < b1) list.push(act("W", c1, w1++));
    while (w0 < b0) list.push(act("W", c0, w0++));
    actions.push(list.filter((a) => a.microBatch < microBatches));
  }
  return makeSchedule("zb-v", p, microBatches, 2, vPlacement(p), actions);
}

/**
 * The `zb-v` entry of the schedule table: two stages per rank in a V, zero bubble at 1F1B's memory (Zero Bubble).
 *
 * @example
 * ```ts
 * import { ZB_V } from "./zb_v.ts";
 * console.log(ZB_V.name, ZB_V.defaultStagesPerRank); // zb-v 2
 * ```
 */
export const ZB_V: ScheduleDefinition<"zb-v"> = {
  name: "zb-v",
  description: "two stages per rank in a V, zero bubble at 1F1B's memory (Zero Bubble)",
  defaultStagesPerRank: 2,
  checkShape: twoStagesPerRank("zb-v"),
  generate: ({ ranks, microBatches }) => zbV(ranks, microBatches),
  // The paper's figure, reached in the steady state of back-to-back iterations.
  bubble: ({ ranks: p, microBatches: m, f, i, w }) =>
    bubbleRatio(Math.max(0, (p - 1) * (f + i - 2 * w)), 2 * m * (f + i + w)),
};
