// Checks that a measured timeline follows its schedule: per rank the list
// order, no overlap, and every data dependency (independent of the runtime).

import assert from "node:assert/strict";
import { type Action, formatAction } from "../../../src/pipeline/schedule/action.ts";
import type { Schedule, TimedEvent } from "../../../src/pipeline/schedule/schedule.ts";

const key = (kind: string, stage: number, mb: number, it: number) => `${it}:${kind}${stage}/${mb}`;

// Ranks in different threads date their events with their own clocks,
// mapped onto one by `performance.timeOrigin`: the mapping is off by tens of
// microseconds (measured up to ~60 µs), while a hand-over between workers
// can take less. A dependency across ranks may therefore appear to start up
// to this much before its input ended; the order itself is tested without
// clocks in handover_order_test.ts.
export const CROSS_THREAD_CLOCK_MS = 0.25;

/**
 * Asserts order, count, overlap and dependencies of `events` for
 * `iterations` runs of `schedule` (of its forward actions only with `forwardOnly`).
 * Ranks on other threads' clocks pass `CROSS_THREAD_CLOCK_MS` as `crossRankSlackMs`.
 */
export function assertFollowsSchedule(
  schedule: Schedule,
  events: readonly TimedEvent[],
  iterations = 1,
  firstIteration = 0,
  forwardOnly = false,
  crossRankSlackMs = 0,
): void {
  const S = schedule.stageToRank.length;
  for (let r = 0; r < schedule.ranks; r++) {
    const lane = events.filter((e) => e.rank === r).sort((a, b) => a.start - b.start);
    const want: string[] = [];
    for (let it = firstIteration; it < firstIteration + iterations; it++) {
      for (const a of schedule.actions[r]) {
        if (!forwardOnly || a.kind === "F") want.push(`${it}:${formatAction(a)}`);
      }
    }
    assert.deepEqual(
      lane.map((e) => `${e.iteration}:${formatAction(e.action)}`),
      want,
      `rank ${r} runs its list in order`,
    );
    for (let i = 1; i < lane.length; i++) {
      assert.ok(lane[i].start >= lane[i - 1].end, `rank ${r}: ${i}th action overlaps the previous`);
    }
  }
  const at = new Map<string, TimedEvent>();
  for (const e of events) {
    at.set(key(e.action.kind, e.action.stage, e.action.microBatch, e.iteration), e);
  }
  const need = (e: TimedEvent, dep: TimedEvent | undefined, what: string) => {
    assert.ok(dep !== undefined, `${formatAction(e.action)} has no ${what}`);
    const slack = e.rank === dep.rank ? 0 : crossRankSlackMs;
    assert.ok(
      e.start >= dep.end - slack,
      `iteration ${e.iteration}: ${
        formatAction(e.action)
      } starts at ${e.start} before its ${what} ${formatAction(dep.action)} ends at ${dep.end}`,
    );
  };
  for (const e of events) {
    const { kind, stage: s, microBatch: mb } = e.action as Action;
    const it = e.iteration;
    if (kind === "F" && s > 0) need(e, at.get(key("F", s - 1, mb, it)), "input forward");
    if (kind === "B" || kind === "I") {
      need(e, at.get(key("F", s, mb, it)), "own forward");
      if (s < S - 1) {
        need(
          e,
          at.get(key("B", s + 1, mb, it)) ?? at.get(key("I", s + 1, mb, it)),
          "input-gradient pass",
        );
      }
    }
    if (kind === "W") need(e, at.get(key("I", s, mb, it)), "I pass");
  }
}
