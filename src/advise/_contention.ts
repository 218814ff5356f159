// The schedule simulator with contention between ranks: each action is a
// fixed amount of work that proceeds at its "alone" rate while no other rank
// computes and at its "together" rate while every rank does (ranks share
// the cores' memory bandwidth and caches), with n of P ranks busy in between
// by linear interpolation of the time per action. An action's duration thus
// depends on how much of it overlaps other ranks' compute, which in turn
// depends on every duration: stepping time from event to event (an action
// starts or ends, a hand-over arrives) with the rates of that instant gives
// the consistent timeline directly. Dependencies as in the plain simulator:
// F(s, mb) needs F(s−1, mb); B/I(s, mb) needs F(s, mb) and B/I(s+1, mb);
// W(s, mb) needs I(s, mb); crossing ranks adds `comm`; each rank runs its
// list again right after its own last action. Used by step_prediction.ts.

import type { Schedule, TimedEvent } from "../pipeline/schedule/schedule.ts";

/** Per-stage cost tables of the kinds a schedule runs, ms. */
export interface KindCosts {
  readonly F: readonly number[];
  readonly I: readonly number[];
  readonly W: readonly number[];
  readonly B: readonly number[];
}

/**
 * The time of one action when `busy` of `ranks` ranks compute (itself
 * included): `alone` at 1, `together` at `ranks`, linear in between.
 */
export function contendedTime(
  alone: number,
  together: number,
  busy: number,
  ranks: number,
): number {
  if (ranks <= 1 || busy <= 1) return alone;
  return alone + (together - alone) * (Math.min(busy, ranks) - 1) / (ranks - 1);
}

/**
 * Runs `iterations` back-to-back steps of a structurally valid schedule
 * with contention; returns every action's span, sorted by start, then rank.
 * Throws an Error when no rank can make progress (a deadlocked order).
 */
export function simulateContention(
  schedule: Schedule,
  alone: KindCosts,
  together: KindCosts,
  comm: number,
  iterations: number,
): TimedEvent[] {
  const { ranks, microBatches: m, stageToRank, actions } = schedule;
  const S = stageToRank.length;
  const per = S * m;
  const fEnd = new Float64Array(per * iterations).fill(NaN);
  const gEnd = new Float64Array(per * iterations).fill(NaN);
  const ptr = new Array<number>(ranks).fill(0);
  const free = new Array<number>(ranks).fill(0);
  // The running action per rank: work left (1 = all of it) and its start.
  const left = new Array<number>(ranks).fill(0);
  const startedAt = new Array<number>(ranks).fill(NaN);
  const events: TimedEvent[] = [];
  const cost = (t: KindCosts, kind: "F" | "I" | "W" | "B", s: number) => t[kind][s];

  // The time the action's inputs are all there (NaN: one is not produced yet).
  const readyAt = (r: number, i: number): number => {
    const L = actions[r].length;
    const it = Math.floor(i / L);
    const a = actions[r][i - it * L];
    const base = it * per;
    const s = a.stage;
    const k = base + s * m + a.microBatch;
    let t = free[r];
    const need = (end: number, from: number) => {
      if (Number.isNaN(end)) t = NaN;
      else {
        const arrive = end + (stageToRank[from] !== r ? comm : 0);
        if (arrive > t) t = arrive;
      }
    };
    if (a.kind === "F") {
      if (s > 0) need(fEnd[k - m], s - 1);
    } else if (a.kind === "W") need(gEnd[k], s);
    else {
      need(fEnd[k], s);
      if (s < S - 1) need(gEnd[k + m], s + 1);
    }
    return t;
  };

  const finish = (r: number, now: number) => {
    const L = actions[r].length;
    const i = ptr[r];
    const it = Math.floor(i / L);
    const a = actions[r][i - it * L];
    events.push({ rank: r, action: a, iteration: it, start: startedAt[r], end: now });
    const k = it * per + a.stage * m + a.microBatch;
    if (a.kind === "F") fEnd[k] = now;
    else if (a.kind !== "W") gEnd[k] = now;
    free[r] = now;
    ptr[r] = i + 1;
    startedAt[r] = NaN;
  };

  const total = actions.map((l) => l.length * iterations);
  let now = 0;
  for (;;) {
    // Start every action whose inputs are there; zero-cost ones end at once.
    let wake = Infinity;
    for (let changed = true; changed;) {
      changed = false;
      wake = Infinity;
      for (let r = 0; r < ranks; r++) {
        if (!Number.isNaN(startedAt[r]) || ptr[r] >= total[r]) continue;
        const t = readyAt(r, ptr[r]);
        if (Number.isNaN(t)) continue;
        if (t > now) {
          if (t < wake) wake = t;
          continue;
        }
        startedAt[r] = now;
        left[r] = 1;
        const L = actions[r].length;
        const a = actions[r][ptr[r] % L];
        if (cost(alone, a.kind, a.stage) === 0 && cost(together, a.kind, a.stage) === 0) {
          finish(r, now);
          changed = true;
        }
      }
    }
    const running: number[] = [];
    for (let r = 0; r < ranks; r++) if (!Number.isNaN(startedAt[r])) running.push(r);
    if (running.length === 0) {
      if (wake === Infinity) break;
      now = wake;
      continue;
    }
    // Every running action's time at the current number of busy ranks.
    const times = running.map((r) => {
      const a = actions[r][ptr[r] % actions[r].length];
      return contendedTime(
        cost(alone, a.kind, a.stage),
        cost(together, a.kind, a.stage),
        running.length,
        ranks,
      );
    });
    let dt = wake - now;
    for (let j = 0; j < running.length; j++) dt = Math.min(dt, left[running[j]] * times[j]);
    now += dt;
    for (let j = 0; j < running.length; j++) {
      const r = running[j];
      const rest = left[r] - dt / times[j];
      // What is left after the earliest end is rounding: that action ends.
      if (rest <= 1e-12 || left[r] * times[j] <= dt) finish(r, now);
      else left[r] = rest;
    }
  }
  if (ptr.some((p, r) => p < total[r])) {
    throw new Error("the schedule deadlocks: no rank can make progress");
  }
  events.sort((a, b) => a.start - b.start || a.rank - b.rank);
  return events;
}
