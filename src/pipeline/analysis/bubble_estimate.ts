/**
 * Closed-form bubble estimates of the named schedules, from the reference
 * sheet's formulas.
 *
 * @module
 */

import type { ActionCosts } from "../schedule/costs.ts";
import { SCHEDULE_REGISTRY, type ScheduleName } from "../schedule/generate.ts";

/**
 * The reference sheet's closed-form bubble fraction, `idle / (busy + idle)`
 * per rank, with one stage's costs (`costs` as in `simulate`; for per-stage
 * arrays the largest entry of each kind is used; f = F, i = I, w = W,
 * b = B = full backward):
 *
 * - gpipe, 1f1b: (p−1)(f+b) / (m(f+b) + (p−1)(f+b)).
 * - interleaved-1f1b: (p−1)(f+b) / (V·m(f+b) + (p−1)(f+b)); exact when m is a multiple of p.
 * - looped-bfs: 1 − V·m / ((V−1)·max(m, p) + m + p − 1).
 * - zb-h1: idle (p−1)(f+i−w) against busy m(f+i+w); exact for m ≥ p.
 * - zb-h2, zb-v: idle max(0, (p−1)(f+i−2w)): the paper's figure, reached in the steady
 *   state of back-to-back iterations (0 when f = i = w).
 * - zb-auto, dualpipe-v, v-half, v-min: no closed form: `NaN` (simulate the generated schedule instead).
 *
 * Each formula is its schedule's `bubble` in the schedule table. Checks its
 * arguments as {@linkcode generateSchedule} does.
 *
 * @example
 * ```ts
 * import { estimateBubbleFraction } from "@conveyor/core/analysis";
 * console.log(estimateBubbleFraction("1f1b", 4, 8).toFixed(3)); // 0.273
 * ```
 */
export function estimateBubbleFraction(
  name: ScheduleName | string,
  ranks: number,
  microBatches: number,
  costs?: ActionCosts,
  stagesPerRank?: number,
): number {
  return SCHEDULE_REGISTRY.estimateBubble(name, ranks, microBatches, costs, stagesPerRank);
}
