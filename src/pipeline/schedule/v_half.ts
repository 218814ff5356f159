/**
 * V-Half (Qi et al., "Pipeline Parallelism with Controllable Memory", arXiv
 * 2405.15362): two stages per rank in a V, as ZB-V (rank r holds stages r
 * and 2p−1−r), built under a per-rank activation limit of about half of
 * 1F1B's: ⌊(p+2)/2⌋ full stages' worth of micro-batches (a stage of the V
 * is half a full stage). The order comes from the paper's building block:
 * one micro-batch's F, I and W passes are placed with the given costs at
 * the earliest free slots modulo a repeat interval, the block repeats every
 * interval, and the shortest interval whose order fits the limit wins (see
 * `_v_block.ts`). At equal costs and p = 8, m = 32 it holds 4 full stages'
 * worth on its busiest rank (1F1B: 8) at a bubble below 1F1B's; with
 * unequal costs its larger budget than V-Min's buys a shorter interval.
 *
 * @module
 */

import type { Schedule } from "./schedule.ts";
import type { StageCosts } from "./costs.ts";
import { makeSchedule, twoStagesPerRank, vPlacement } from "./_common.ts";
import { vCappedOrder, vStageCosts } from "./_v_block.ts";
import { zbV } from "./zb_v.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/**
 * A memory-capped V order (V-Half's and V-Min's generator); costs per full
 * stage (one entry per rank), `memoryLimit` in full stages' worth of
 * micro-batches per rank (≥ 1); arguments pre-checked.
 */
export function vCapped(
  name: string,
  ranks: number,
  microBatches: number,
  costs: StageCosts,
  comm: number,
  memoryLimit: number,
): Schedule {
  const placement = vPlacement(ranks);
  const actions = vCappedOrder(
    ranks,
    microBatches,
    placement,
    vStageCosts(costs, placement),
    comm,
    Math.floor(2 * memoryLimit),
    // ZB-V's order (p full stages' worth) competes where the limit allows it.
    [zbV(ranks, microBatches).actions.map((l) => [...l])],
  );
  return makeSchedule(name, ranks, microBatches, 2, placement, actions);
}

/**
 * V-Half's activation limit per rank, in full stages' worth of
 * micro-batches: ⌊(p+2)/2⌋, about half of 1F1B's p.
 *
 * @example
 * ```ts
 * import { vHalfMemoryLimit } from "./v_half.ts";
 * console.log(vHalfMemoryLimit(8)); // 5
 * ```
 */
export function vHalfMemoryLimit(ranks: number): number {
  return Math.floor((ranks + 2) / 2);
}

/**
 * The `v-half` entry of the schedule table: a V within about half of
 * 1F1B's activation memory.
 *
 * @example
 * ```ts
 * import { V_HALF } from "./v_half.ts";
 * console.log(V_HALF.name, V_HALF.defaultStagesPerRank); // v-half 2
 * ```
 */
export const V_HALF: ScheduleDefinition<"v-half"> = {
  name: "v-half",
  description:
    "two stages per rank in a V within half of 1F1B's activation memory (Controllable Memory)",
  defaultStagesPerRank: 2,
  checkShape: twoStagesPerRank("v-half"),
  costAware: true,
  defaultMemoryLimit: vHalfMemoryLimit,
  generate: ({ ranks, microBatches, costs, comm, memoryLimit }) =>
    vCapped("v-half", ranks, microBatches, costs, comm, memoryLimit),
  // No closed form: simulate the generated schedule.
  bubble: () => NaN,
};
