/**
 * Automatic zero-bubble schedule (the Zero Bubble paper's ZB-1p / ZB-2p
 * heuristic, without its ILP refinement): the greedy list scheduler is run
 * with the real costs and communication delay under several settings —
 * placement (one stage per rank, or ZB-V's V: rank r holds stages r and
 * 2p−1−r), warm-up depth (1F1B's, ZB-H2's, ZB-V's, or as deep as memory
 * allows) and W policy (fill every idle gap, or only gaps no F or I is
 * about to claim) — and the order with the smallest simulated makespan
 * that respects the memory limit wins (ties: lower peak memory, then the
 * earlier setting, so one stage per rank before the V).
 *
 * Units: costs are per full stage (one rank's share of the model, as with
 * V = 1); a V candidate cuts the model into 2p stages, stage c being half
 * of full stage ⌊c/2⌋, so its passes cost half (the communication delay per
 * hop stays). The memory limit is in full-stage micro-batches per rank: one
 * stage-micro-batch of the V counts 1/2. Default p (1F1B's); 2p−1 is
 * ZB-H2's.
 *
 * @module
 */

import type { Schedule } from "./schedule.ts";
import type { StageCosts } from "./costs.ts";
import { peakActivations, runSchedule } from "./engine.ts";
import { loopPlacement, makeSchedule, vPlacement } from "./_common.ts";
import { greedyOrder, type GreedyPolicy } from "./_greedy.ts";
import { zbH1 } from "./zb_h1.ts";
import { zbH2 } from "./zb_h2.ts";
import { zbV } from "./zb_v.ts";
import { dualPipeV } from "./dualpipe_v.ts";
import type { ScheduleDefinition } from "./schedule_registry.ts";

/** One candidate the search tried. */
export interface ZbAutoCandidate {
  /** The greedy's settings, or the hand-made schedule the order was taken from. */
  readonly policy: GreedyPolicy | { readonly seed: string };
  readonly schedule: Schedule;
  /** Simulated makespan with the stage costs of its placement. */
  readonly makespan: number;
  /** Largest peak of in-flight activations over ranks, in full-stage units (stages / V). */
  readonly peak: number;
}

/**
 * Stage costs of a placement with V stages per rank from costs per full
 * stage (arrays of `ranks` entries): stage c is the V-th part of full stage
 * ⌊c/V⌋, so each pass costs 1/V of that stage's.
 */
function splitStageCosts(costs: StageCosts, stagesPerRank: number): StageCosts {
  const V = stagesPerRank;
  const split = (a: Float64Array) =>
    Float64Array.from({ length: a.length * V }, (_, c) => a[Math.floor(c / V)] / V);
  return { F: split(costs.F), B: split(costs.B), I: split(costs.I), W: split(costs.W) };
}

function makespanOf(schedule: Schedule, costs: StageCosts, comm: number): number {
  const run = runSchedule(schedule, costs, comm, 1);
  let makespan = 0;
  for (const ends of run.ends) for (const e of ends) if (e > makespan) makespan = e;
  return makespan;
}

/**
 * Every candidate the search tries, in the order it tries them: one stage
 * per rank first, then (unless `stagesPerRank` asks for 1) the V placement.
 * `costs` are per full stage, `limit` in full-stage units (see the module
 * doc); `stagesPerRank` undefined searches both placements.
 */
export function zbAutoCandidates(
  ranks: number,
  microBatches: number,
  costs: StageCosts,
  comm: number,
  limit: number,
  stagesPerRank?: number,
): ZbAutoCandidate[] {
  const p = ranks;
  const out: ZbAutoCandidate[] = [];
  // [W fill, W lag (none; r; 0 until the last forward's group), which pass first]
  const policies: ["eager" | "lookahead", "none" | "r" | "0", "I" | "F"][] = [];
  for (const prefer of ["I", "F"] as const) {
    for (const lag of ["none", "r", "0"] as const) {
      for (const fill of ["eager", "lookahead"] as const) policies.push([fill, lag, prefer]);
    }
  }
  for (const V of stagesPerRank === undefined ? [1, 2] : [stagesPerRank]) {
    // Activations come in whole stage-micro-batches.
    const memoryLimit = Math.floor(limit * V);
    const placement = V === 1 ? loopPlacement(p, 1) : vPlacement(p);
    const stageCosts = V === 1 ? costs : splitStageCosts(costs, V);
    const depths: number[][] = V === 1
      ? [
        Array.from({ length: p }, (_, r) => p - r),
        Array.from({ length: p }, (_, r) => 2 * (p - 1 - r) + 1),
        new Array(p).fill(memoryLimit),
      ]
      : [
        // ZB-V's warm-up: every rank runs 2p forwards before its first I.
        new Array(p).fill(2 * p),
        Array.from({ length: p }, (_, r) => 2 * p - r),
        Array.from({ length: p }, (_, r) => 2 * (p - r) + r),
        new Array(p).fill(memoryLimit),
      ];
    const leads: (number[] | null)[] = V === 1 ? [null] : [
      Array.from({ length: p }, (_, r) => 2 * (p - r) - 1),
      Array.from({ length: p }, (_, r) => 2 * (p - r)),
      Array.from({ length: p }, (_, r) => p - r),
    ];
    const seen = new Set<string>();
    const add = (policy: ZbAutoCandidate["policy"], actions: Schedule["actions"]) => {
      const key = JSON.stringify(actions);
      if (seen.has(key)) return;
      seen.add(key);
      const schedule = makeSchedule("zb-auto", p, microBatches, V, placement, actions);
      out.push({
        policy,
        schedule,
        makespan: makespanOf(schedule, stageCosts, comm),
        peak: Math.max(...peakActivations(schedule)) / V,
      });
    };
    // The hand-made zero-bubble orders of this placement seed the search (as
    // the paper's ILP starts from its heuristics' orders): at tight memory
    // ZB-V's hand-tuned cool-down still beats every greedy setting here.
    const seeds: [string, Schedule][] = V === 1
      ? [["zb-h1", zbH1(p, microBatches)], ["zb-h2", zbH2(p, microBatches)]]
      : [["zb-v", zbV(p, microBatches)]];
    if (V === 2 && microBatches >= 2 * p) seeds.push(["dualpipe-v", dualPipeV(p, microBatches)]);
    for (const [seed, s] of seeds) add({ seed }, s.actions);
    for (const depth of depths) {
      for (const [wFill, lag, prefer] of policies) {
        // ZB-V's steady F, I, W groups only pay on the V.
        if (lag === "0" && V === 1) continue;
        for (const lead of leads) {
          const policy: GreedyPolicy = {
            ...(lead === null ? {} : { lead }),
            maxAhead: depth.map((d) => Math.max(1, Math.min(d, memoryLimit))),
            memoryLimit: new Array(p).fill(memoryLimit),
            wFill,
            prefer,
            ...(lag === "r" ? { wLag: Array.from({ length: p }, (_, r) => r) } : {}),
            ...(lag === "0" ? { wLag: new Array(p).fill(0), wLagUntilLastF: true } : {}),
          };
          const actions = greedyOrder(p, microBatches, placement, stageCosts, comm, policy);
          // The V can stall when memory fills with forwards of a rank's lower stage.
          if (actions === null) continue;
          add(policy, actions);
        }
      }
    }
  }
  return out;
}

/**
 * The best candidate's schedule (costs per full stage, limit in full-stage
 * units); arguments pre-checked. Throws a RangeError when `stagesPerRank`
 * is 2 and no V order fits the limit.
 */
export function zbAuto(
  ranks: number,
  microBatches: number,
  costs: StageCosts,
  comm: number,
  memoryLimit: number,
  stagesPerRank?: number,
): Schedule {
  let best: ZbAutoCandidate | null = null;
  const candidates = zbAutoCandidates(ranks, microBatches, costs, comm, memoryLimit, stagesPerRank);
  for (const c of candidates) {
    if (c.peak > memoryLimit) continue;
    if (
      best === null || c.makespan < best.makespan - 1e-9 ||
      (Math.abs(c.makespan - best.makespan) <= 1e-9 && c.peak < best.peak)
    ) best = c;
  }
  if (best === null) {
    if (stagesPerRank === 2) {
      throw new RangeError(
        `zb-auto found no V-placement order within memoryLimit ${memoryLimit} ` +
          `(full-stage units) for ranks ${ranks}, microBatches ${microBatches}`,
      );
    }
    throw new Error("zb-auto found no order within the memory limit (internal error)");
  }
  return best.schedule;
}

/**
 * The `zb-auto` entry of the schedule table: searches zero-bubble orders with the given costs, comm and memory limit.
 *
 * @example
 * ```ts
 * import { ZB_AUTO } from "./zb_auto.ts";
 * console.log(ZB_AUTO.name, ZB_AUTO.defaultStagesPerRank); // zb-auto 1
 * ```
 */
export const ZB_AUTO: ScheduleDefinition<"zb-auto"> = {
  name: "zb-auto",
  description: "searches zero-bubble orders with the given costs, comm and memory limit",
  defaultStagesPerRank: 1,
  checkShape: ({ stagesPerRank: V, stagesPerRankGiven }) => {
    // Not given: the search tries both placements.
    if (stagesPerRankGiven && V !== 1 && V !== 2) {
      throw new RangeError(`zb-auto places 1 stage per rank or 2 in a V, got stagesPerRank ${V}`);
    }
  },
  costAware: true,
  generate: (
    { ranks, microBatches, costs, comm, memoryLimit, stagesPerRank, stagesPerRankGiven },
  ) =>
    zbAuto(
      ranks,
      microBatches,
      costs,
      comm,
      memoryLimit,
      stagesPerRankGiven ? stagesPerRank : undefined,
    ),
  // No closed form: simulate the generated schedule.
  bubble: () => NaN,
};
