/**
 * Interleaved 1F1B (Narayanan et al. 2021) with loop placement (the c-th stage of
 * rank r is global stage c·p + r), depth first, built as PyTorch's
 * `ScheduleInterleaved1F1B` builds it: micro-batches go in rounds of
 * `m / rounds` with `rounds = max(1, floor(m / p))`, so m need not be a
 * multiple of p, only of the round count; rank r warms up with
 * (V−1)·perRound + 2(p−1−r) forwards (at most m·V), then alternates one
 * forward and one full backward, moving to the next stage every perRound
 * passes, then drains its backwards.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, bubbleRatio, loopPlacement, makeSchedule } from "./_common.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** Rounds of micro-batches; m must be a multiple of it (checked by the caller). */
export function interleavedRounds(ranks: number, microBatches: number): number {
  return Math.max(1, Math.floor(microBatches / ranks));
}

/** Interleaved 1F1B with `stagesPerRank` ≥ 2 stages per rank; arguments pre-checked. */
export function interleavedOneFOneB(
  ranks: number,
  microBatches: number,
  stagesPerRank: number,
): Schedule {
  const V = stagesPerRank;
  const m = microBatches;
  const perRound = m / interleavedRounds(ranks, m);
  const total = m * V;
  const actions: Action[][] = [];
  for (let r = 0; r < ranks; r++) {
    const warmup = Math.min((V - 1) * perRound + 2 * (ranks - 1 - r), total);
    const fMb = new Int32Array(V);
    const bMb = new Int32Array(V);
    const list: Action[] = [];
    const forward = (k: number) => {
      const c = Math.floor(k / perRound) % V;
      list.push(act("F", c * ranks + r, fMb[c]++));
    };
    const backward = (j: number) => {
      const c = V - 1 - (Math.floor(j / perRound) % V);
      list.push(act("B", c * ranks + r, bMb[c]++));
    };
    for (let k = 0; k < warmup; k++) forward(k);
    for (let j = 0; j < total - warmup; j++) {
      forward(warmup + j);
      backward(j);
    }
    for (let j = total - warmup; j < total; j++) backward(j);
    actions.push(list);
  }
  return makeSchedule("interleaved-1f1b", ranks, m, V, loopPlacement(ranks, V), actions);
}

/**
 * The `interleaved-1f1b` entry of the schedule table: 1F1B over V >= 2 looped stages per rank, in PyTorch's rounds.
 *
 * @example
 * ```ts
 * import { INTERLEAVED_ONE_F_ONE_B } from "./interleaved_one_f_one_b.ts";
 * console.log(INTERLEAVED_ONE_F_ONE_B.name, INTERLEAVED_ONE_F_ONE_B.defaultStagesPerRank); // interleaved-1f1b 2
 * ```
 */
export const INTERLEAVED_ONE_F_ONE_B: ScheduleDefinition<"interleaved-1f1b"> = {
  name: "interleaved-1f1b",
  description: "1F1B over V >= 2 looped stages per rank, in PyTorch's rounds",
  defaultStagesPerRank: 2,
  checkShape: ({ ranks: p, microBatches: m, stagesPerRank: V }) => {
    if (V < 2) {
      throw new RangeError(`interleaved-1f1b needs stagesPerRank >= 2, got ${V}`);
    }
    const rounds = interleavedRounds(p, m);
    if (m % rounds !== 0) {
      throw new RangeError(
        `interleaved-1f1b runs micro-batches in max(1, floor(microBatches / ranks)) = ${rounds} ` +
          `equal rounds (PyTorch's rule), so microBatches must be a multiple of ${rounds}, ` +
          `got microBatches ${m} with ranks ${p}`,
      );
    }
  },
  generate: ({ ranks, microBatches, stagesPerRank }) =>
    interleavedOneFOneB(ranks, microBatches, stagesPerRank),
  // Exact when m is a multiple of p.
  bubble: ({ ranks: p, microBatches: m, stagesPerRank: V, f, b }) =>
    bubbleRatio((p - 1) * (f + b), V * m * (f + b)),
};
