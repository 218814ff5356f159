/**
 * ZB-H2 (Qi et al. 2024): rank r runs 2(p−1−r)+1 forwards before its first
 * input-gradient pass (twice 1F1B's warm-up), runs input-gradient passes as
 * soon as they can, and postpones weight-gradient passes until the memory
 * limit of 2p−1 stage-micro-batches or an idle slot calls for them. At
 * T_F = T_I = T_W each rank then works without a gap from time r to
 * 3m + r: a parallelogram, so consecutive iterations interlock with zero
 * bubble when each stage steps its optimizer right after its own last W.
 *
 * The order is fixed by these rules at unit costs (whatever the real
 * costs), built by the greedy list scheduler.
 *
 * @module
 */

import type { Schedule } from "./schedule.ts";
import { bubbleRatio, loopPlacement, makeSchedule, oneStagePerRank } from "./_common.ts";
import { greedyOrder } from "./_greedy.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** ZB-H2 over `ranks` ranks (one stage each); arguments pre-checked. */
export function zbH2(ranks: number, microBatches: number): Schedule {
  const placement = loopPlacement(ranks, 1);
  const one = new Float64Array(ranks).fill(1);
  const actions = greedyOrder(
    ranks,
    microBatches,
    placement,
    { F: one, B: one, I: one, W: one },
    0,
    {
      maxAhead: Array.from({ length: ranks }, (_, r) => 2 * (ranks - 1 - r) + 1),
      memoryLimit: new Array(ranks).fill(2 * ranks - 1),
      wFill: "eager",
    },
  );
  // One stage per rank and a depth within the memory limit cannot stall.
  if (actions === null) throw new Error("zb-h2's greedy order stalled (internal error)");
  return makeSchedule("zb-h2", ranks, microBatches, 1, placement, actions);
}

/**
 * The `zb-h2` entry of the schedule table: zero bubble with 2p-1 micro-batches in flight (Zero Bubble).
 *
 * @example
 * ```ts
 * import { ZB_H2 } from "./zb_h2.ts";
 * console.log(ZB_H2.name, ZB_H2.defaultStagesPerRank); // zb-h2 1
 * ```
 */
export const ZB_H2: ScheduleDefinition<"zb-h2"> = {
  name: "zb-h2",
  description: "zero bubble with 2p-1 micro-batches in flight (Zero Bubble)",
  defaultStagesPerRank: 1,
  checkShape: oneStagePerRank("zb-h2"),
  generate: ({ ranks, microBatches }) => zbH2(ranks, microBatches),
  // The paper's figure, reached in the steady state of back-to-back iterations.
  bubble: ({ ranks: p, microBatches: m, f, i, w }) =>
    bubbleRatio(Math.max(0, (p - 1) * (f + i - 2 * w)), m * (f + i + w)),
};
