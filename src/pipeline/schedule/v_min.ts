/**
 * V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory", arXiv
 * 2405.15362): V-Half's construction (two stages per rank in a V, built
 * from the paper's building block with the given F, I, W costs) under a
 * limit of about a third of 1F1B's activations: ⌊(p+4)/3⌋ full stages'
 * worth of micro-batches per rank. Where the tightest block does not fit,
 * a longer repeat interval does: memory bought with bubble.
 *
 * @module
 */

import { twoStagesPerRank } from "./_common.ts";
import { vCapped } from "./v_half.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/**
 * V-Min's activation limit per rank, in full stages' worth of
 * micro-batches: ⌊(p+4)/3⌋, about a third of 1F1B's p.
 *
 * @example
 * ```ts
 * import { vMinMemoryLimit } from "./v_min.ts";
 * console.log(vMinMemoryLimit(8)); // 4
 * ```
 */
export function vMinMemoryLimit(ranks: number): number {
  return Math.floor((ranks + 4) / 3);
}

/**
 * The `v-min` entry of the schedule table: a V within about a third of
 * 1F1B's activation memory.
 *
 * @example
 * ```ts
 * import { V_MIN } from "./v_min.ts";
 * console.log(V_MIN.name, V_MIN.defaultStagesPerRank); // v-min 2
 * ```
 */
export const V_MIN: ScheduleDefinition<"v-min"> = {
  name: "v-min",
  description:
    "two stages per rank in a V within a third of 1F1B's activation memory (Controllable Memory)",
  defaultStagesPerRank: 2,
  checkShape: twoStagesPerRank("v-min"),
  costAware: true,
  defaultMemoryLimit: vMinMemoryLimit,
  generate: ({ ranks, microBatches, costs, comm, memoryLimit }) =>
    vCapped("v-min", ranks, microBatches, costs, comm, memoryLimit),
  // No closed form: simulate the generated schedule.
  bubble: () => NaN,
};
