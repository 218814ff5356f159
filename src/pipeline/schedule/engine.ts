// Timing engine shared by the simulator, the validator and the automatic
// schedule: runs each rank's list in order, every action as early as its
// inputs allow. Not exported from the package.
//
// Model: a rank runs one action at a time, in list order; receives block
// (an action waits until its inputs have arrived) and sends never block.
// Inputs: F(s, mb) needs F(s−1, mb); B/I(s, mb) needs F(s, mb) and the
// input gradient from B/I(s+1, mb); W(s, mb) needs I(s, mb). Crossing to
// another rank adds `comm`. With several iterations each rank runs its list
// again right after its own last action (the stage's optimizer step follows
// its own last backward; there is no global barrier).

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import type { StageCosts } from "./costs.ts";

/** Where a rank stands still when no rank can make progress. */
export interface Stall {
  readonly rank: number;
  readonly index: number;
  readonly iteration: number;
  readonly action: Action;
  /** The action whose result it waits for. */
  readonly waitingFor: Action;
  /** Rank that holds `waitingFor`'s stage. */
  readonly waitingForRank: number;
}

/** Start and end of every action, per rank, in list order over all iterations. */
export interface EngineRun {
  readonly starts: Float64Array[];
  readonly ends: Float64Array[];
  /** Empty when the schedule ran to completion. */
  readonly stalls: Stall[];
}

/**
 * Runs a structurally valid schedule (every stage and micro-batch in range,
 * every action on its stage's rank).
 */
export function runSchedule(
  schedule: Schedule,
  costs: StageCosts,
  comm: number,
  iterations: number,
): EngineRun {
  const { ranks, microBatches: m, stageToRank, actions } = schedule;
  const S = stageToRank.length;
  const per = S * m;
  // End times per iteration; NaN = not run yet.
  const fEnd = new Float64Array(per * iterations).fill(NaN);
  const gEnd = new Float64Array(per * iterations).fill(NaN);
  // Which backward kind produces the input gradient of (s, mb): B or I.
  const gradKind: ("B" | "I")[] = new Array(per).fill("B");
  for (const list of actions) {
    for (const a of list) if (a.kind === "I") gradKind[a.stage * m + a.microBatch] = "I";
  }
  const starts = actions.map((l) => new Float64Array(l.length * iterations));
  const ends = actions.map((l) => new Float64Array(l.length * iterations));
  const ptr = new Array<number>(ranks).fill(0);
  const free = new Array<number>(ranks).fill(0);
  let done = 0;
  for (let r = 0; r < ranks; r++) if (actions[r].length === 0) done++;

  // Returns the ready time, or -1 when an input is missing (its index is
  // left in `missing`).
  let missingKind: "F" | "G" = "F";
  let missingStage = 0;
  const readyAt = (a: Action, r: number, it: number): number => {
    const base = it * per;
    const s = a.stage;
    const k = s * m + a.microBatch;
    let t = free[r];
    if (a.kind === "F") {
      if (s > 0) {
        const e = fEnd[base + k - m];
        if (Number.isNaN(e)) {
          missingKind = "F";
          missingStage = s - 1;
          return -1;
        }
        const arrive = e + (stageToRank[s - 1] !== r ? comm : 0);
        if (arrive > t) t = arrive;
      }
      return t;
    }
    if (a.kind === "W") {
      const e = gEnd[base + k];
      if (Number.isNaN(e)) {
        missingKind = "G";
        missingStage = s;
        return -1;
      }
      return e > t ? e : t;
    }
    const own = fEnd[base + k];
    if (Number.isNaN(own)) {
      missingKind = "F";
      missingStage = s;
      return -1;
    }
    if (own > t) t = own;
    if (s < S - 1) {
      const e = gEnd[base + k + m];
      if (Number.isNaN(e)) {
        missingKind = "G";
        missingStage = s + 1;
        return -1;
      }
      const arrive = e + (stageToRank[s + 1] !== r ? comm : 0);
      if (arrive > t) t = arrive;
    }
    return t;
  };

  while (done < ranks) {
    let progress = false;
    for (let r = 0; r < ranks; r++) {
      const list = actions[r];
      const L = list.length;
      const total = L * iterations;
      while (ptr[r] < total) {
        const i = ptr[r];
        const it = Math.floor(i / L);
        const a = list[i - it * L];
        const t = readyAt(a, r, it);
        if (t < 0) break;
        const s = a.stage;
        const cost = a.kind === "F"
          ? costs.F[s]
          : a.kind === "B"
          ? costs.B[s]
          : a.kind === "I"
          ? costs.I[s]
          : costs.W[s];
        const end = t + cost;
        starts[r][i] = t;
        ends[r][i] = end;
        free[r] = end;
        const k = it * per + s * m + a.microBatch;
        if (a.kind === "F") fEnd[k] = end;
        else if (a.kind !== "W") gEnd[k] = end;
        ptr[r] = i + 1;
        progress = true;
        if (ptr[r] === total) done++;
      }
    }
    if (!progress) break;
  }

  const stalls: Stall[] = [];
  if (done < ranks) {
    for (let r = 0; r < ranks; r++) {
      const L = actions[r].length;
      if (ptr[r] >= L * iterations) continue;
      const i = ptr[r];
      const it = Math.floor(i / L);
      const a = actions[r][i - it * L];
      readyAt(a, r, it);
      const mb = a.microBatch;
      const waitingFor: Action = missingKind === "F"
        ? { kind: "F", stage: missingStage, microBatch: mb }
        : { kind: gradKind[missingStage * m + mb], stage: missingStage, microBatch: mb };
      stalls.push({
        rank: r,
        index: i - it * L,
        iteration: it,
        action: a,
        waitingFor,
        waitingForRank: stageToRank[missingStage],
      });
    }
  }
  return { starts, ends, stalls };
}

/**
 * Peak in-flight activations per rank, in stage-micro-batches: +1 when an F
 * starts, −1 when the pass that last needs them ends (B, or W after an I/W
 * split). A rank runs one action at a time, so this follows its list order.
 */
export function peakActivations(schedule: Schedule): number[] {
  return schedule.actions.map((list) => {
    let live = 0;
    let peak = 0;
    for (const a of list) {
      if (a.kind === "F") {
        live++;
        if (live > peak) peak = live;
      } else if (a.kind === "B" || a.kind === "W") live--;
    }
    return peak;
  });
}
