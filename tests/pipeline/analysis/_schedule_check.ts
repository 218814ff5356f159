// Test helpers for schedules: an independent check of simulated events
// (written from the dependency rules, not from the simulator's code).

import assert from "node:assert/strict";
import { type Action, formatAction } from "../../../src/pipeline/schedule/action.ts";
import type { Schedule, TimedEvent } from "../../../src/pipeline/schedule/schedule.ts";

/** Costs as plain numbers per kind. */
export interface PlainCosts {
  F: number;
  B: number;
  I: number;
  W: number;
}

export const UNIT: PlainCosts = { F: 1, B: 2, I: 1, W: 1 };

/** Exact bubble rate from the sheet: idle / (busy + idle). */
export function rate(idle: number, busy: number): number {
  return idle / (idle + busy);
}

/**
 * Checks events against the rules: each rank's events follow its list
 * (iteration by iteration), never overlap, last their cost, start no
 * earlier than their inputs arrive, and start as early as that allows
 * (the later of the rank's previous end and the latest input arrival).
 */
export function checkEvents(
  s: Schedule,
  events: readonly TimedEvent[],
  costs: PlainCosts,
  comm: number,
  iterations: number,
): void {
  const end = new Map<string, number>();
  const key = (it: number, kind: string, stage: number, mb: number) =>
    `${it}:${kind}:${stage}:${mb}`;
  const byRank: TimedEvent[][] = Array.from({ length: s.ranks }, () => []);
  for (const e of events) byRank[e.rank].push(e);
  for (const list of byRank) list.sort((a, b) => a.start - b.start);
  for (let r = 0; r < s.ranks; r++) {
    assert.equal(byRank[r].length, s.actions[r].length * iterations, `rank ${r} event count`);
    byRank[r].forEach((e, i) => {
      const want = s.actions[r][i % s.actions[r].length];
      assert.deepEqual(e.action, want, `rank ${r} event ${i} follows the list`);
      assert.equal(e.iteration, Math.floor(i / s.actions[r].length));
      assert.ok(Math.abs(e.end - e.start - costs[e.action.kind]) < 1e-9, "duration is the cost");
      const k = e.action.kind === "B" || e.action.kind === "I" ? "G" : e.action.kind;
      end.set(key(e.iteration, k, e.action.stage, e.action.microBatch), e.end);
    });
  }
  const S = s.stageToRank.length;
  for (let r = 0; r < s.ranks; r++) {
    let prev = 0;
    for (const e of byRank[r]) {
      const a: Action = e.action;
      const inputs: [string, number][] = [];
      const need = (kind: string, stage: number) => {
        const t = end.get(key(e.iteration, kind, stage, a.microBatch));
        assert.ok(t !== undefined, `${formatAction(a)} input ${kind}${stage} ran`);
        inputs.push([kind, t + (s.stageToRank[stage] !== r ? comm : 0)]);
      };
      if (a.kind === "F" && a.stage > 0) need("F", a.stage - 1);
      if (a.kind === "B" || a.kind === "I") {
        need("F", a.stage);
        if (a.stage < S - 1) need("G", a.stage + 1);
      }
      if (a.kind === "W") need("G", a.stage);
      const earliest = Math.max(prev, ...inputs.map(([, t]) => t));
      assert.ok(
        Math.abs(e.start - earliest) < 1e-9,
        `rank ${r} ${
          formatAction(a)
        } (iteration ${e.iteration}) starts at ${e.start}, earliest ${earliest}`,
      );
      prev = e.end;
    }
  }
}
