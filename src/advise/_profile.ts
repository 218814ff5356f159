// The advisor's measurements in its worker group: every layer's passes
// profiled on every rank at once (merged per layer), the hand-over delay
// between two ranks, and the runtime's cost per action. Not exported from
// the package.

import type { PassProfile, PassTiming } from "../pipeline/partition/layer_passes.ts";
import { passTiming, relativeSpread } from "../pipeline/partition/layer_passes.ts";
import { generateSchedule } from "../pipeline/schedule/generate.ts";
import { summarizeTimeline } from "../pipeline/analysis/timeline_summary.ts";
import type { RankGroup } from "../pipeline/runtime/rank_group.ts";
import { predictStep, type RuntimeOverheads } from "./step_prediction.ts";
import type { AdviseCalls } from "./_executor.ts";

const median = (xs: readonly number[]): number => passTiming(xs).median;

// Per layer and pass: the median of the ranks' medians, the smallest min,
// the largest max.
function mergeTiming(ts: readonly PassTiming[]): PassTiming {
  return {
    median: median(ts.map((t) => t.median)),
    min: Math.min(...ts.map((t) => t.min)),
    max: Math.max(...ts.map((t) => t.max)),
  };
}

/** One profile from those of several ranks that ran at once. */
export function mergeProfiles(ps: readonly PassProfile[]): PassProfile {
  if (ps.length === 1) return ps[0];
  const first = ps[0];
  const n = Math.min(...ps.map((p) => p.totals.length));
  const totals = first.totals.slice(0, n).map((_, r) => median(ps.map((p) => p.totals[r])));
  const all = ps.flatMap((p) => p.totals);
  return {
    rows: first.rows,
    backend: first.backend,
    layers: first.layers.map((l, i) => {
      const step = l.step === undefined
        ? {}
        : { step: mergeTiming(ps.map((p) => p.layers[i].step!)) };
      return {
        ...l,
        F: mergeTiming(ps.map((p) => p.layers[i].F)),
        I: mergeTiming(ps.map((p) => p.layers[i].I)),
        W: mergeTiming(ps.map((p) => p.layers[i].W)),
        ...step,
      };
    }),
    ...(first.loss === undefined ? {} : { loss: mergeTiming(ps.map((p) => p.loss!)) }),
    totals,
    spread: relativeSpread(all),
  };
}

/** Profiles on ranks `0 … copies − 1` of `group` at once and merges the results. */
export async function profileOnRanks(
  group: RankGroup<AdviseCalls>,
  copies: number,
  rows: number,
  repeats: number,
  warmup: number,
  minTimeMs: number,
): Promise<PassProfile> {
  const ps = await Promise.all(
    Array.from(
      { length: copies },
      (_, r) => group.call(r, "profile", { rows, repeats, warmup, minTimeMs }),
    ),
  );
  return mergeProfiles(ps);
}

/**
 * The hand-over delay (half the median round trip of `floats` floats
 * between ranks 0 and 1) and the runtime's cost per action: a run of
 * do-nothing actions that hand over as much, whose median period is
 * matched by the simulator with that delay and a fixed cost per action.
 */
export async function measureOverheads(
  group: RankGroup<AdviseCalls>,
  floats: number,
): Promise<RuntimeOverheads> {
  if (group.ranks < 2) return { actionMs: 0, handOverMs: 0 };
  const rounds = 30;
  const [times] = await Promise.all([
    group.call(0, "ping", { peer: 1, floats, rounds, lead: true }),
    group.call(1, "ping", { peer: 0, floats, rounds, lead: false }),
  ]);
  const handOverMs = median(times.slice(5)); // the first rounds open the ports
  const schedule = group.schedule;
  const iterations = 10;
  await group.run({ iterations: 2 }); // warm-up
  const periods: number[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await group.run({ iterations });
    periods.push(summarizeTimeline(r.events, schedule.ranks, { steadyFrom: 1 }).period ?? 0);
  }
  const measured = median(periods);
  const S = schedule.stageToRank.length;
  const at = (o: number) =>
    predictStep(
      schedule,
      {
        F: new Array(S).fill(o),
        I: new Array(S).fill(o),
        W: new Array(S).fill(o),
        B: new Array(S).fill(o),
        step: new Array(S).fill(0),
      },
      { actionMs: 0, handOverMs },
      iterations,
    ).stepMs;
  // stepMs grows with the cost per action: bisect for the measured period.
  let lo = 0;
  let hi = Math.max(measured, 1e-6);
  if (at(0) >= measured) return { actionMs: 0, handOverMs };
  while (at(hi) < measured) hi *= 2;
  for (let k = 0; k < 40; k++) {
    const mid = (lo + hi) / 2;
    if (at(mid) < measured) lo = mid;
    else hi = mid;
  }
  return { actionMs: (lo + hi) / 2, handOverMs };
}

/** The schedule the advisor's group is built with (its runs time the runtime's overheads). */
export function calibrationSchedule(ranks: number): ReturnType<typeof generateSchedule> {
  return generateSchedule(ranks === 1 ? "1f1b" : "zb-h1", { ranks, microBatches: 8 });
}
