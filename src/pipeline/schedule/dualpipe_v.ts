/**
 * DualPipeV (DeepSeek-V3's DualPipe folded into a V, as PyTorch's
 * `ScheduleDualPipeV` builds it): V placement (rank r holds stages r and
 * 2p−1−r), needs m ≥ 2p. After a warm-up of forwards on both stages, the
 * main phase pairs a forward of one stage with a full backward of the other
 * (DualPipe overlaps such a pair's compute with its communication; here the
 * two passes run one after the other), and the tail switches half of the
 * backwards to I/W splits so that W passes fill the cool-down.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, makeSchedule, twoStagesPerRank, vPlacement } from "./_common.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** DualPipeV over `ranks` ranks (2 stages each, m ≥ 2·ranks); arguments pre-checked. */
export function dualPipeV(ranks: number, microBatches: number): Schedule {
  const p = ranks;
  const m = microBatches;
  const actions: Action[][] = [];
  for (let r = 0; r < p; r++) {
    const s0 = r;
    const s1 = 2 * p - 1 - r;
    const list: Action[] = [];
    const nextF = new Map<number, number>();
    const nextBack = new Map<number, number>();
    const pendingW: [number, number][] = [];
    const F = (s: number) => {
      const mb = nextF.get(s) ?? 0;
      nextF.set(s, mb + 1);
      list.push(act("F", s, mb));
    };
    // A full backward, or an input-gradient pass whose W waits in the queue.
    const back = (s: number, split: boolean) => {
      const mb = nextBack.get(s) ?? 0;
      nextBack.set(s, mb + 1);
      list.push(act(split ? "I" : "B", s, mb));
      if (split) pendingW.push([s, mb]);
    };
    const W = () => {
      const next = pendingW.shift();
      if (next !== undefined) list.push(act("W", next[0], next[1]));
    };
    for (let i = 0; i < 2 * (p - r - 1); i++) F(s0);
    for (let i = 0; i < r + 1; i++) {
      F(s0);
      F(s1);
    }
    for (let i = 0; i < p - r - 1; i++) {
      back(s1, true);
      W();
      F(s1);
    }
    for (let i = 0; i < m - 2 * p + r + 1; i++) {
      F(s0);
      back(s1, false);
      F(s1);
      back(s0, false);
    }
    for (let i = 0; i < p - r - 1; i++) {
      back(s1, false);
      F(s1);
      back(s0, false);
    }
    let split = false;
    const half = Math.floor((r + 1) / 2);
    for (let i = 0; i < r + 1; i++) {
      if (i === half && r % 2 === 1) split = true;
      back(s1, split);
      if (i === half && r % 2 === 0) split = true;
      back(s0, split);
    }
    for (let i = 0; i < p - r - 1; i++) {
      W();
      back(s0, split);
    }
    for (let i = 0; i < r + 1; i++) W();
    while (pendingW.length > 0) W();
    actions.push(list);
  }
  return makeSchedule("dualpipe-v", p, m, 2, vPlacement(p), actions);
}

/**
 * The `dualpipe-v` entry of the schedule table: DeepSeek's DualPipe folded into a V: two stages per rank, m >= 2p.
 *
 * @example
 * ```ts
 * import { DUALPIPE_V } from "./dualpipe_v.ts";
 * console.log(DUALPIPE_V.name, DUALPIPE_V.defaultStagesPerRank); // dualpipe-v 2
 * ```
 */
export const DUALPIPE_V: ScheduleDefinition<"dualpipe-v"> = {
  name: "dualpipe-v",
  description: "DeepSeek's DualPipe folded into a V: two stages per rank, m >= 2p",
  defaultStagesPerRank: 2,
  checkShape: (shape) => {
    twoStagesPerRank("dualpipe-v")(shape);
    const { ranks: p, microBatches: m } = shape;
    if (m < 2 * p) {
      throw new RangeError(
        `dualpipe-v needs microBatches >= 2 × ranks (${
          2 * p
        }), got microBatches ${m} with ranks ${p}`,
      );
    }
  },
  generate: ({ ranks, microBatches }) => dualPipeV(ranks, microBatches),
  // No closed form: simulate the generated schedule.
  bubble: () => NaN,
};
