// Greedy list scheduler: simulates all ranks at once and, whenever a rank
// is free, picks its next action by fixed rules (input gradient first, then
// a forward if the warm-up depth and memory allow, then a weight gradient to
// fill the gap). The Zero Bubble paper's ZB-1p / ZB-2p heuristic is this
// kind of scheduler; ZB-H2 is built by it at unit costs and `zb-auto`
// searches over its settings with the real costs. Not exported from the
// package.

import type { Action } from "./action.ts";
import type { StageCosts } from "./costs.ts";
import { act } from "./_common.ts";

/** Settings of one greedy run. */
export interface GreedyPolicy {
  /** Per rank: most forwards that may run ahead of input-gradient passes (F done − I done). */
  readonly maxAhead: readonly number[];
  /** Per rank: most stage-micro-batches in flight (F done − W done). */
  readonly memoryLimit: readonly number[];
  /**
   * "eager": an idle rank runs a pending W at once; "lookahead": only when
   * no F or I it knows of becomes ready before that W would end.
   */
  readonly wFill: "eager" | "lookahead";
  /**
   * Per rank, optional: most W passes left pending while a rank has other
   * work; beyond it the oldest W runs first (ZB-H1 lets rank r trail by r).
   */
  readonly wLag?: readonly number[];
  /**
   * With `wLag`: the lag stops applying once a rank has run all its
   * forwards and one more input-gradient pass (closing the last F, I, W
   * group), so the cool-down runs input-gradient passes first and lets W
   * fill the gaps (ZB-V's cool-down after its steady F, I, W groups).
   */
  readonly wLagUntilLastF?: boolean;
  /**
   * Which pass goes first when both a forward (allowed by depth and memory)
   * and an input-gradient pass are ready: "I" (shortest critical path) or
   * "F" (1F1B's order: one forward, then one backward).
   */
  readonly prefer?: "I" | "F";
  /**
   * Per rank, optional, for ranks with several stages: most forwards a stage
   * may run ahead of the rank's next higher stage (ZB-V lets rank r's first
   * stage lead its second by 2(p−r)−1). Without it a rank may fill its
   * memory with its lower stage's forwards and stall.
   */
  readonly lead?: readonly number[];
}

/**
 * Per-rank action lists in decision order. Every (stage, micro-batch) gets
 * one F, one I and one W. Forwards of a stage run in micro-batch order, and
 * so do its input-gradient passes. `null` when the policy's limits leave no
 * rank anything to run (possible with several stages per rank: a rank can
 * fill its memory with forwards of its lower stage and never get to run the
 * upper stage's forward that its backwards wait for).
 */
export function greedyOrder(
  ranks: number,
  microBatches: number,
  stageToRank: readonly number[],
  costs: StageCosts,
  comm: number,
  policy: GreedyPolicy,
): Action[][] | null {
  const m = microBatches;
  const S = stageToRank.length;
  const stagesOf: number[][] = Array.from({ length: ranks }, () => []);
  // Higher stages first: they are closer to the loss, so their passes
  // shorten the critical path of the backward.
  for (let s = S - 1; s >= 0; s--) stagesOf[stageToRank[s]].push(s);
  const fEnd = new Float64Array(S * m).fill(NaN);
  const iEnd = new Float64Array(S * m).fill(NaN);
  const fNext = new Int32Array(S);
  const iNext = new Int32Array(S);
  const wQueue: [number, number][][] = Array.from({ length: ranks }, () => []);
  const ahead = new Int32Array(ranks);
  const live = new Int32Array(ranks);
  const time = new Float64Array(ranks);
  const left = new Int32Array(ranks);
  const waited = new Float64Array(ranks).fill(NaN);
  const hint = new Float64Array(ranks).fill(Infinity);
  const fLeft = new Int32Array(ranks);
  const iAfterLastF = new Int32Array(ranks);
  for (let s = 0; s < S; s++) {
    left[stageToRank[s]] += 3 * m;
    fLeft[stageToRank[s]] += m;
  }
  const out: Action[][] = Array.from({ length: ranks }, () => []);
  let remaining = 3 * S * m;

  // Known ready time of the next F / I of stage s, NaN if not yet known,
  // Infinity if there is none.
  const fReady = (s: number, r: number): number => {
    const mb = fNext[s];
    if (mb >= m) return Infinity;
    if (s === 0) return 0;
    const e = fEnd[(s - 1) * m + mb];
    return Number.isNaN(e) ? NaN : e + (stageToRank[s - 1] !== r ? comm : 0);
  };
  const iReady = (s: number, r: number): number => {
    const mb = iNext[s];
    if (mb >= m) return Infinity;
    const own = fEnd[s * m + mb];
    if (Number.isNaN(own)) return NaN;
    if (s === S - 1) return own;
    const e = iEnd[(s + 1) * m + mb];
    if (Number.isNaN(e)) return NaN;
    return Math.max(own, e + (stageToRank[s + 1] !== r ? comm : 0));
  };

  let guard = 0;
  // Each decision either runs an action or moves one rank past a time at
  // which every other rank may act once: bounded by actions × ranks.
  const guardMax = (3 * S * m + 1) * (4 * ranks + 8) + 1000;
  while (remaining > 0) {
    if (++guard > guardMax) throw new Error("greedy scheduler made no progress (internal error)");
    // The unfinished rank with the earliest time decides next.
    // Among ties, a rank that already found nothing to do at this time goes last.
    let r = -1;
    for (let q = 0; q < ranks; q++) {
      if (left[q] === 0) continue;
      if (
        r < 0 || time[q] < time[r] ||
        (time[q] === time[r] && waited[r] === time[r] && waited[q] !== time[q])
      ) r = q;
    }
    const t = time[r];
    const queue = wQueue[r];
    if (
      policy.wLag !== undefined && queue.length > policy.wLag[r] &&
      !(policy.wLagUntilLastF && fLeft[r] === 0 && iAfterLastF[r] > 1)
    ) {
      const [s, mb] = queue.shift()!;
      out[r].push(act("W", s, mb));
      live[r]--;
      time[r] = t + costs.W[s];
      left[r]--;
      remaining--;
      continue;
    }
    let best: { kind: "F" | "I"; s: number; at: number } | null = null;
    let nextKnown = Infinity;
    const fAllowed = ahead[r] < policy.maxAhead[r] && live[r] < policy.memoryLimit[r];
    let bestI: { s: number; at: number } | null = null;
    let bestF: { s: number; at: number } | null = null;
    const stages = stagesOf[r];
    for (let j = 0; j < stages.length; j++) {
      const s = stages[j];
      const ti = iReady(s, r);
      if (!Number.isNaN(ti) && ti !== Infinity) {
        if (ti <= t) {
          if (bestI === null || ti < bestI.at) bestI = { s, at: ti };
        } else if (ti < nextKnown) nextKnown = ti;
      }
      if (!fAllowed) continue;
      if (
        policy.lead !== undefined && j > 0 && fNext[s] - fNext[stages[j - 1]] >= policy.lead[r]
      ) continue;
      const tf = fReady(s, r);
      if (!Number.isNaN(tf) && tf !== Infinity) {
        if (tf <= t) {
          if (bestF === null || tf < bestF.at) bestF = { s, at: tf };
        } else if (tf < nextKnown) nextKnown = tf;
      }
    }
    if (bestF !== null && (bestI === null || policy.prefer === "F")) {
      best = { kind: "F", ...bestF };
    } else if (bestI !== null) best = { kind: "I", ...bestI };
    if (best !== null) {
      const s = best.s;
      if (best.kind === "I") {
        const mb = iNext[s]++;
        const end = t + costs.I[s];
        iEnd[s * m + mb] = end;
        out[r].push(act("I", s, mb));
        wQueue[r].push([s, mb]);
        if (fLeft[r] === 0) iAfterLastF[r]++;
        ahead[r]--;
        time[r] = end;
      } else {
        const mb = fNext[s]++;
        const end = t + costs.F[s];
        fEnd[s * m + mb] = end;
        out[r].push(act("F", s, mb));
        fLeft[r]--;
        ahead[r]++;
        live[r]++;
        time[r] = end;
      }
      left[r]--;
      remaining--;
      continue;
    }
    if (queue.length > 0) {
      const [s, mb] = queue[0];
      const wEnd = t + costs.W[s];
      if (policy.wFill === "eager" || nextKnown >= wEnd) {
        queue.shift();
        out[r].push(act("W", s, mb));
        live[r]--;
        time[r] = wEnd;
        left[r]--;
        remaining--;
        continue;
      }
    }
    // Nothing to do now: wait until something may change: a known ready
    // time, or another rank's next decision. A rank at this same time that
    // has not looked yet goes first (its action may make something ready);
    // one that has looked and found nothing left its own wake time in `hint`.
    let wake = nextKnown;
    let tied = false;
    for (let q = 0; q < ranks; q++) {
      if (q === r || left[q] === 0) continue;
      if (time[q] > t && time[q] < wake) wake = time[q];
      if (time[q] === t) {
        if (waited[q] !== t) tied = true;
        else if (hint[q] < wake) wake = hint[q];
      }
    }
    waited[r] = t;
    hint[r] = wake;
    if (tied) continue;
    if (wake === Infinity) return null;
    time[r] = wake;
  }
  return out;
}
