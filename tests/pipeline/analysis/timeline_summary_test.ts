import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import type { TimedEvent } from "../../../src/pipeline/schedule/schedule.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { summarizeTimeline } from "../../../src/pipeline/analysis/timeline_summary.ts";
import { ev, gpipe2x2, splitV2x2 } from "../_hand_events.ts";

const EPS = 1e-12;

function close(got: number | undefined, want: number, what: string): void {
  assert.ok(got !== undefined && Math.abs(got - want) <= EPS, `${what}: got ${got}, want ${want}`);
}

Deno.test("summarizeTimeline equals simulate's figures on the simulated events of every kind of schedule", () => {
  const cases: [string, number, number, object][] = [
    ["gpipe", 4, 8, {}],
    ["1f1b", 4, 8, { costs: { F: 1, B: 3 }, comm: 0.25 }],
    ["interleaved-1f1b", 2, 4, {}],
    ["zb-h1", 4, 8, { costs: { F: 1, I: 1, W: 2 } }],
    ["zb-h2", 4, 8, {}],
    ["zb-v", 2, 8, { comm: 0.5 }],
  ];
  for (const [name, ranks, microBatches, options] of cases) {
    const schedule = generateSchedule(name, { ranks, microBatches });
    for (const iterations of [1, 3]) {
      const sim = simulate(schedule, { ...options, iterations });
      const sum = summarizeTimeline(sim.events, ranks);
      const at = `${name} p=${ranks} m=${microBatches} × ${iterations}`;
      assert.equal(sum.iterations, iterations, `${at}: iterations`);
      close(sum.makespan, sim.makespan, `${at}: makespan`);
      sum.busy.forEach((b, r) => close(b, sim.busy[r], `${at}: busy[${r}]`));
      sum.idle.forEach((b, r) => close(b, sim.idle[r], `${at}: idle[${r}]`));
      close(sum.bubbleFraction, sim.bubbleFraction, `${at}: bubble`);
      if (iterations === 1) {
        assert.equal(sum.period, undefined);
        assert.equal(sum.steadyStateBubble, undefined);
      } else {
        close(sum.period, sim.period!, `${at}: period`);
        close(sum.steadyStateBubble, sim.steadyStateBubble!, `${at}: steady-state bubble`);
      }
    }
  }
});

Deno.test("summarizeTimeline: simulated events shifted in time (a measured clock) give the same figures", () => {
  const sim = simulate(generateSchedule("zb-h2", { ranks: 2, microBatches: 6 }), { iterations: 2 });
  const shifted = sim.events.map((e) => ({ ...e, start: e.start + 1000, end: e.end + 1000 }));
  const sum = summarizeTimeline(shifted, 2);
  close(sum.makespan, sim.makespan, "makespan from the first start, not from 0");
  close(sum.bubbleFraction, sim.bubbleFraction, "bubble");
  close(sum.period, sim.period!, "period");
  close(sum.steadyStateBubble, sim.steadyStateBubble!, "steady-state bubble");
});

Deno.test("summarizeTimeline on hand-built single iterations: GPipe 2×2 and a V-shaped split", () => {
  // GPipe, F = 1, B = 2: each rank is busy 2·1 + 2·2 = 6 of the 9 time units.
  const g = summarizeTimeline(gpipe2x2(), 2);
  assert.equal(g.iterations, 1);
  assert.equal(g.makespan, 9);
  assert.deepEqual(g.busy, [6, 6]);
  assert.deepEqual(g.idle, [3, 3]);
  close(g.bubbleFraction, 1 - 12 / 18, "GPipe bubble 1/3");
  // 12 passes of length 1 per rank over 13 units.
  const v = summarizeTimeline(splitV2x2(), 2);
  assert.equal(v.makespan, 13);
  assert.deepEqual(v.busy, [12, 12]);
  close(v.bubbleFraction, 1 / 13, "split bubble 1/13");
});

Deno.test("summarizeTimeline: period and steady-state bubble from the last two iterations' ends", () => {
  // Three iterations on two ranks, starting at t = 10, listed out of order.
  // Iteration ends: 14, 17, 21 (the last end over both ranks) → period 4.
  // Busy: rank 0 = 2 + 2 + 2 = 6, rank 1 = 3 + 1 + 3 = 7; total 13.
  const events: TimedEvent[] = [
    ev(1, "B", 1, 0, 18, 21, 2),
    ev(0, "F", 0, 0, 10, 12, 0),
    ev(1, "F", 1, 0, 11, 14, 0),
    ev(0, "F", 0, 0, 14, 16, 1),
    ev(1, "F", 1, 0, 16, 17, 1),
    ev(0, "F", 0, 0, 17, 19, 2),
  ];
  const s = summarizeTimeline(events, 2);
  assert.equal(s.iterations, 3);
  assert.equal(s.makespan, 11);
  assert.deepEqual(s.busy, [6, 7]);
  assert.deepEqual(s.idle, [5, 4]);
  close(s.bubbleFraction, 1 - 13 / 22, "bubble");
  assert.equal(s.period, 4);
  close(s.steadyStateBubble, 1 - (13 / 3) / (2 * 4), "steady-state bubble");

  // Iterations are taken by number, not by their place in the list: 9 is
  // listed first, yet the period is end(9) − end(5) = 7 − 3.
  const numbered = summarizeTimeline([ev(0, "F", 0, 1, 4, 7, 9), ev(0, "F", 0, 0, 0, 3, 5)], 1);
  assert.equal(numbered.iterations, 2);
  assert.equal(numbered.period, 4);
  close(numbered.steadyStateBubble, 1 - (6 / 2) / 4, "steady-state bubble 1/4");
});

Deno.test("summarizeTimeline: a rank without events is all idle; no events at all give zeros", () => {
  const s = summarizeTimeline([ev(0, "F", 0, 0, 2, 5)], 3);
  assert.equal(s.makespan, 3);
  assert.deepEqual(s.busy, [3, 0, 0]);
  assert.deepEqual(s.idle, [0, 3, 3]);
  close(s.bubbleFraction, 1 - 3 / 9, "bubble 2/3");

  const none = summarizeTimeline([], 2);
  assert.deepEqual(
    [none.iterations, none.makespan, none.bubbleFraction, none.period],
    [0, 0, 0, undefined],
  );
  assert.deepEqual(none.busy, [0, 0]);

  // Zero-length actions: no span, no bubble (not NaN).
  const instant = summarizeTimeline([ev(0, "F", 0, 0, 4, 4), ev(0, "F", 0, 0, 4, 4, 1)], 1);
  assert.equal(instant.bubbleFraction, 0);
  assert.equal(instant.steadyStateBubble, 0);
});

Deno.test("summarizeTimeline: bad ranks and events are refused naming the value", () => {
  const ok = [ev(0, "F", 0, 0, 0, 1)];
  const cases: [string, () => unknown, new (...a: never[]) => Error, RegExp][] = [
    [
      "ranks 0",
      () => summarizeTimeline(ok, 0),
      RangeError,
      /ranks must be a positive integer, got 0/,
    ],
    ["ranks 1.5", () => summarizeTimeline(ok, 1.5), RangeError, /got 1\.5/],
    [
      "not an array",
      () => summarizeTimeline("x" as unknown as TimedEvent[], 1),
      TypeError,
      /events must be an array of TimedEvent, got string/,
    ],
    [
      "rank out of range",
      () => summarizeTimeline([...ok, ev(2, "F", 0, 0, 0, 1)], 2),
      RangeError,
      /events\[1\]\.rank must be in \[0, 1\], got 2/,
    ],
    [
      "end before start",
      () => summarizeTimeline([ev(0, "F", 0, 0, 3, 2)], 1),
      RangeError,
      /events\[0\] must have finite start <= end, got 3\.\.2/,
    ],
    [
      "NaN time",
      () => summarizeTimeline([ev(0, "F", 0, 0, NaN, 2)], 1),
      RangeError,
      /got NaN\.\.2/,
    ],
    [
      "null event",
      () => summarizeTimeline([null as unknown as TimedEvent], 1),
      RangeError,
      /events\[0\]\.rank must be in \[0, 0\], got undefined/,
    ],
  ];
  for (const [what, fn, type, message] of cases) {
    assert.throws(fn, (e: Error) => e instanceof type && message.test(e.message), what);
  }
});

Deno.test("summarizeTimeline steadyFrom: the median period from that iteration on", () => {
  // One rank, one action of length 2 per iteration; iterations end at
  // 3, 10, 13, 19, 22 → periods 7, 3, 6, 3.
  const ends = [3, 10, 13, 19, 22];
  const events = ends.map((end, i) => ev(0, "F", 0, 0, end - 2, end, i));
  const at = (steadyFrom: number) => summarizeTimeline(events, 1, { steadyFrom });
  // From iteration 2: periods 3, 6, 3 → median 3 (the 6 is an outlier, not averaged in).
  assert.equal(at(2).period, 3);
  close(at(2).steadyStateBubble, 1 - 2 / 3, "steady-state bubble at period 3");
  // From iteration 1: 7, 3, 6, 3 → an even count takes the mean of the middle two, (3 + 6) / 2.
  assert.equal(at(1).period, 4.5);
  // From the last iteration: the default, the last period alone.
  assert.equal(at(4).period, 3);
  assert.equal(summarizeTimeline(events, 1).period, 3);
  // Everything but the period is as without the option.
  const { period: _p, steadyStateBubble: _s, ...rest } = at(1);
  const { period: _q, steadyStateBubble: _t, ...plain } = summarizeTimeline(events, 1);
  assert.deepEqual(rest, plain);
  // One iteration: no period, and steadyFrom is not checked against it.
  assert.equal(summarizeTimeline(events.slice(0, 1), 1, { steadyFrom: 3 }).period, undefined);
});

Deno.test("summarizeTimeline steadyFrom on simulated runs equals simulate's steady state once periods settle", () => {
  for (const name of ["1f1b", "zb-h2", "zb-v"]) {
    const schedule = generateSchedule(name, { ranks: 4, microBatches: 8 });
    const sim = simulate(schedule, { iterations: 8 });
    const sum = summarizeTimeline(sim.events, 4, { steadyFrom: 2 });
    close(sum.period, sim.period!, `${name}: period`);
    close(sum.steadyStateBubble, sim.steadyStateBubble!, `${name}: steady-state bubble`);
  }
});

Deno.test("summarizeTimeline: a bad steadyFrom or options is refused naming the value", () => {
  const events = [0, 1, 2].map((i) => ev(0, "F", 0, 0, 2 * i, 2 * i + 1, i));
  assert.throws(
    () => summarizeTimeline(events, 1, { steadyFrom: 0 }),
    (e: Error) =>
      e instanceof RangeError && /steadyFrom must be an integer >= 1 .*got 0/.test(e.message),
  );
  assert.throws(() => summarizeTimeline(events, 1, { steadyFrom: 1.5 }), /got 1\.5/);
  assert.throws(
    () => summarizeTimeline(events, 1, { steadyFrom: 3 }),
    (e: Error) =>
      e instanceof RangeError &&
      /steadyFrom must be at most iterations - 1 = 2, got 3/.test(e.message),
  );
  assert.throws(
    () => summarizeTimeline(events, 1, null as unknown as { steadyFrom: number }),
    (e: Error) => e instanceof TypeError && /options must be an object/.test(e.message),
  );
});
