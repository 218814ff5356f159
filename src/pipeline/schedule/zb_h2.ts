/**
 * ZB-H2 (Qi et al. 2024): rank r runs 2(p−1−r)+1 forwards before its first
 * input-gradient pass (twice 1F1B's warm-up), runs input-gradient passes as
 * soon as they can, and postpones weight-gradient passes until the memory
 * limit of 2p−1 chunk-micro-batches or an idle slot calls for them. At
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
import { loopPlacement, makeSchedule } from "./_common.ts";
import { greedyOrder } from "./_greedy.ts";

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
