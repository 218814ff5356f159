/**
 * Automatic zero-bubble schedule (the Zero Bubble paper's ZB-1p / ZB-2p
 * heuristic, without its ILP refinement): the greedy list scheduler is run
 * with the real costs and communication delay under several settings —
 * warm-up depth (1F1B's, ZB-H2's, or as deep as memory allows) and W
 * policy (fill every idle gap, or only gaps no F or I is about to claim) —
 * and the order with the smallest simulated makespan that respects the
 * memory limit wins (ties: lower peak memory, then the earlier setting).
 * One stage per rank; memory limit in chunk-micro-batches per rank
 * (default p, 1F1B's; 2p−1 gives ZB-H2's memory).
 *
 * @module
 */

import type { Schedule } from "../schedule.ts";
import type { StageCosts } from "../_costs.ts";
import { peakActivations, runSchedule } from "../_engine.ts";
import { loopPlacement, makeSchedule } from "./_common.ts";
import { greedyOrder, type GreedyPolicy } from "./_greedy.ts";

/** One candidate the search tried. */
export interface ZbAutoCandidate {
  readonly policy: GreedyPolicy;
  readonly schedule: Schedule;
  readonly makespan: number;
  readonly peak: number;
}

/** Every candidate the search tries, in the order it tries them. */
export function zbAutoCandidates(
  ranks: number,
  microBatches: number,
  costs: StageCosts,
  comm: number,
  limit: number,
): ZbAutoCandidate[] {
  // Activations come in whole chunk-micro-batches.
  const memoryLimit = Math.floor(limit);
  const placement = loopPlacement(ranks, 1);
  const p = ranks;
  const depths: number[][] = [
    Array.from({ length: p }, (_, r) => p - r),
    Array.from({ length: p }, (_, r) => 2 * (p - 1 - r) + 1),
    new Array(p).fill(memoryLimit),
  ];
  const policies: ["eager" | "lookahead", boolean, "I" | "F"][] = [];
  for (const prefer of ["I", "F"] as const) {
    for (const lag of [false, true]) {
      for (const fill of ["eager", "lookahead"] as const) policies.push([fill, lag, prefer]);
    }
  }
  const out: ZbAutoCandidate[] = [];
  const seen = new Set<string>();
  for (const depth of depths) {
    for (const [wFill, lag, prefer] of policies) {
      const policy: GreedyPolicy = {
        maxAhead: depth.map((d) => Math.max(1, Math.min(d, memoryLimit))),
        memoryLimit: new Array(p).fill(memoryLimit),
        wFill,
        prefer,
        ...(lag ? { wLag: Array.from({ length: p }, (_, r) => r) } : {}),
      };
      const actions = greedyOrder(p, microBatches, placement, costs, comm, policy);
      const key = JSON.stringify(actions);
      if (seen.has(key)) continue;
      seen.add(key);
      const schedule = makeSchedule("zb-auto", p, microBatches, 1, placement, actions);
      const run = runSchedule(schedule, costs, comm, 1);
      let makespan = 0;
      for (const ends of run.ends) for (const e of ends) if (e > makespan) makespan = e;
      out.push({ policy, schedule, makespan, peak: Math.max(...peakActivations(schedule)) });
    }
  }
  return out;
}

/** The best candidate's schedule; arguments pre-checked. */
export function zbAuto(
  ranks: number,
  microBatches: number,
  costs: StageCosts,
  comm: number,
  memoryLimit: number,
): Schedule {
  let best: ZbAutoCandidate | null = null;
  for (const c of zbAutoCandidates(ranks, microBatches, costs, comm, memoryLimit)) {
    if (c.peak > memoryLimit) continue;
    if (
      best === null || c.makespan < best.makespan - 1e-9 ||
      (Math.abs(c.makespan - best.makespan) <= 1e-9 && c.peak < best.peak)
    ) best = c;
  }
  if (best === null) {
    throw new Error("zb-auto found no order within the memory limit (internal error)");
  }
  return best.schedule;
}
