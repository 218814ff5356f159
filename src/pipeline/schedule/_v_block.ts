// Memory-capped V orders built from a repeated building block (Qi et al.,
// "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362): the
// passes of one micro-batch (F down the V, I back up, W after each I) are
// placed once, each at the earliest time its inputs allow whose slot is free
// on its rank modulo a repeat interval T; micro-batch j repeats the block
// shifted by j·T, and each rank's list is its passes in time order. An
// activation lives from its F to its W, so a stage holds about
// lifespan / T micro-batches: the tighter the block, the less memory; a
// longer T trades bubble for memory. The engine then runs each list as
// early as its inputs allow, which closes the gaps of the ramp-up and
// cool-down. Not exported from the package.

import type { Action } from "./action.ts";
import type { StageCosts } from "./costs.ts";
import { act, makeSchedule } from "./_common.ts";
import { runSchedule } from "./engine.ts";

/** One placed pass of the block. */
interface Placed {
  readonly action: Action;
  readonly start: number;
}

// Slots taken on one rank, as [start, end) residues modulo T (end may pass T
// for an interval that wraps).
class Circle {
  readonly taken: [number, number][] = [];
  constructor(readonly period: number) {}

  private free(at: number, cost: number): boolean {
    const T = this.period;
    const a = ((at % T) + T) % T;
    const b = a + cost;
    const eps = 1e-9;
    for (const [s, e] of this.taken) {
      // Compare against the interval and its copies one period either side.
      for (const shift of [-T, 0, T]) {
        if (a < e + shift - eps && s + shift < b - eps) return false;
      }
    }
    return true;
  }

  /**
   * A start ≥ ready where `cost` fits: the earliest, or, among the fits no
   * more than `slack` later, the one that touches the most taken slots (so
   * the passes pack without leaving slivers no pass fits in); NaN when no
   * slot of that length is left.
   */
  place(ready: number, cost: number, slack: number): number {
    const T = this.period;
    const eps = 1e-9;
    if (cost > T + eps) return NaN;
    const at = (x: number) => {
      let t = ready + ((((x - ready) % T) + T) % T);
      if (t < ready) t += T;
      return t;
    };
    // A fit that touches a slot starts where one ends or ends where one starts.
    const starts = [ready];
    for (const [s, e] of this.taken) starts.push(at(e), at(s - cost));
    starts.sort((x, y) => x - y);
    let best = NaN;
    let bestTouch = -1;
    for (const t of starts) {
      if (!Number.isNaN(best) && t > best + slack + eps) break;
      if (!this.free(t, cost)) continue;
      const a = ((t % T) + T) % T;
      let touch = 0;
      for (const [s, e] of this.taken) {
        for (const shift of [-T, 0, T]) {
          if (Math.abs(e + shift - a) <= eps) touch++;
          if (Math.abs(s + shift - (a + cost)) <= eps) touch++;
        }
      }
      if (Number.isNaN(best)) {
        best = t;
        bestTouch = touch;
        if (slack <= 0) break;
      } else if (touch > bestTouch) {
        best = t;
        bestTouch = touch;
      }
    }
    if (!Number.isNaN(best)) {
      const a = ((best % T) + T) % T;
      this.taken.push([a, a + cost]);
    }
    return best;
  }
}

/** Settings of one block. */
export interface VBlockPolicy {
  /** Repeat interval T (at least the busiest rank's work for one micro-batch). */
  readonly period: number;
  /**
   * When each W goes: "early" right after its I (least memory), "late" as
   * the last pass placed (W fills whatever the F and I passes left free).
   */
  readonly w: "early" | "late";
  /**
   * How much later than its earliest fit a pass may start to pack tightly
   * against the passes already placed (0: always the earliest fit). Slack
   * lengthens lifespans, so it spends memory to save bubble.
   */
  readonly slack: number;
}

/**
 * Per-rank action lists of the repeated block over the V placement
 * (`stageToRank` of 2p stages), or null when a pass finds no free slot of
 * its length on its rank (T too short for these costs).
 */
export function vBlockOrder(
  ranks: number,
  microBatches: number,
  stageToRank: readonly number[],
  costs: StageCosts,
  comm: number,
  policy: VBlockPolicy,
): Action[][] | null {
  const S = stageToRank.length;
  const T = policy.period;
  const circles = Array.from({ length: ranks }, () => new Circle(T));
  const placed: Placed[] = [];
  const put = (kind: "F" | "I" | "W", s: number, ready: number, cost: number): number => {
    const t = circles[stageToRank[s]].place(ready, cost, policy.slack);
    if (!Number.isNaN(t)) placed.push({ action: act(kind, s, 0), start: t });
    return t;
  };
  const hop = (a: number, b: number) => (stageToRank[a] !== stageToRank[b] ? comm : 0);
  const fEnd = new Float64Array(S);
  for (let s = 0; s < S; s++) {
    const ready = s === 0 ? 0 : fEnd[s - 1] + hop(s - 1, s);
    const t = put("F", s, ready, costs.F[s]);
    if (Number.isNaN(t)) return null;
    fEnd[s] = t + costs.F[s];
  }
  const iEnd = new Float64Array(S);
  const late: number[] = [];
  for (let s = S - 1; s >= 0; s--) {
    const ready = s === S - 1 ? fEnd[s] : Math.max(fEnd[s], iEnd[s + 1] + hop(s + 1, s));
    const t = put("I", s, ready, costs.I[s]);
    if (Number.isNaN(t)) return null;
    iEnd[s] = t + costs.I[s];
    if (policy.w === "early") {
      if (Number.isNaN(put("W", s, iEnd[s], costs.W[s]))) return null;
    } else late.push(s);
  }
  for (const s of late) if (Number.isNaN(put("W", s, iEnd[s], costs.W[s]))) return null;
  // Micro-batch j runs the block shifted by j·T; each rank runs its passes in time order.
  const timed: { action: Action; start: number }[][] = Array.from({ length: ranks }, () => []);
  for (let j = 0; j < microBatches; j++) {
    for (const { action, start } of placed) {
      timed[stageToRank[action.stage]].push({
        action: act(action.kind, action.stage, j),
        start: start + j * T,
      });
    }
  }
  return timed.map((list) =>
    list.sort((x, y) => x.start - y.start || x.action.microBatch - y.action.microBatch)
      .map((e) => e.action)
  );
}

/**
 * Stage costs of the V from costs per full stage (one entry per rank): each
 * stage is half of its rank's full stage, so each pass costs half.
 */
export function vStageCosts(costs: StageCosts, stageToRank: readonly number[]): StageCosts {
  const half = (a: Float64Array) => Float64Array.from(stageToRank, (r) => a[r] / 2);
  return { F: half(costs.F), B: half(costs.B), I: half(costs.I), W: half(costs.W) };
}

/**
 * One micro-batch at a time through the whole V (F down, I back up, each W
 * right after its I): two stage-micro-batches per rank at most, the least
 * memory any V order can hold; the fallback when no block fits the limit.
 */
export function vSequentialOrder(
  ranks: number,
  microBatches: number,
  stageToRank: readonly number[],
): Action[][] {
  const out: Action[][] = Array.from({ length: ranks }, () => []);
  const S = stageToRank.length;
  for (let j = 0; j < microBatches; j++) {
    for (let s = 0; s < S; s++) out[stageToRank[s]].push(act("F", s, j));
    for (let s = S - 1; s >= 0; s--) out[stageToRank[s]].push(act("I", s, j), act("W", s, j));
  }
  return out;
}

/** The searched block settings: W placement × packing slack (in units of the shortest interval). */
const POLICIES: readonly { w: "early" | "late"; slack: number }[] = [0, 0.25, 0.5, 1].flatMap((
  slack,
) => (["late", "early"] as const).map((w) => ({ w, slack })));

/** Longest interval tried, as a multiple of the shortest, and the step between tries. */
const MAX_STRETCH = 3;
const STRETCH_STEP = 0.01;

/**
 * The memory-capped V order of least simulated makespan: for each block
 * setting, the shortest repeat interval (from the busiest rank's work for
 * one micro-batch up to 3 times it, in 1% steps; found by galloping and
 * bisection, as a longer interval holds less) whose order holds at most
 * `limitHalves` stage-micro-batches per rank; every order tried that fits
 * competes, ties going to the lower peak, then the earlier try. Falls back
 * to one micro-batch at a time when no block fits.
 */
export function vCappedOrder(
  ranks: number,
  microBatches: number,
  stageToRank: readonly number[],
  costs: StageCosts,
  comm: number,
  limitHalves: number,
  extra: readonly Action[][][] = [],
): Action[][] {
  const p = ranks;
  let T0 = 0;
  const work = new Float64Array(p);
  for (let s = 0; s < stageToRank.length; s++) {
    work[stageToRank[s]] += costs.F[s] + costs.I[s] + costs.W[s];
  }
  for (const w of work) if (w > T0) T0 = w;
  const peakOf = (actions: Action[][]) => {
    let peak = 0;
    for (const list of actions) {
      let live = 0;
      for (const a of list) {
        if (a.kind === "F") peak = Math.max(peak, ++live);
        else if (a.kind === "W" || a.kind === "B") live--;
      }
    }
    return peak;
  };
  let best: { actions: Action[][]; makespan: number; peak: number } | null = null;
  const consider = (actions: Action[][]) => {
    const peak = peakOf(actions);
    if (peak > limitHalves) return false;
    const run = runSchedule(
      makeSchedule("v", p, microBatches, 2, stageToRank, actions),
      costs,
      comm,
      1,
    );
    if (run.stalls.length > 0) return false;
    let makespan = 0;
    for (const ends of run.ends) for (const e of ends) if (e > makespan) makespan = e;
    if (
      best === null || makespan < best.makespan - 1e-9 ||
      (Math.abs(makespan - best.makespan) <= 1e-9 && peak < best.peak)
    ) best = { actions, makespan, peak };
    return true;
  };
  for (const { w, slack } of POLICIES) {
    const steps = Math.round((MAX_STRETCH - 1) / STRETCH_STEP);
    const tryAt = (k: number): boolean => {
      const period = T0 > 0 ? T0 * (1 + k * STRETCH_STEP) : 1;
      const actions = vBlockOrder(p, microBatches, stageToRank, costs, comm, {
        period,
        w,
        slack: slack * T0,
      });
      return actions !== null && consider(actions);
    };
    // The shortest interval that fits: a longer one holds less (lifespan /
    // interval), so gallop up from the shortest, then halve the last gap.
    if (tryAt(0)) continue;
    let bad = 0, good = -1;
    for (let k = 1; k <= steps; k = Math.min(steps, 2 * k)) {
      if (tryAt(k)) {
        good = k;
        break;
      }
      bad = k;
      if (k === steps) break;
    }
    while (good - bad > 1) {
      const mid = (bad + good) >> 1;
      if (tryAt(mid)) good = mid;
      else bad = mid;
    }
  }
  for (const actions of extra) consider(actions);
  if (best === null) consider(vSequentialOrder(p, microBatches, stageToRank));
  if (best === null) throw new Error("no V order within the memory limit (internal error)");
  return (best as { actions: Action[][] }).actions;
}
