import assert from "node:assert/strict";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { ScheduleDeadlockError } from "../../../src/pipeline/analysis/validate.ts";
import type { Action, ActionKind } from "../../../src/pipeline/schedule/action.ts";
import type { Schedule } from "../../../src/pipeline/schedule/schedule.ts";
import { checkEvents, UNIT } from "./_schedule_check.ts";

const a = (kind: ActionKind, stage: number, microBatch: number): Action => ({
  kind,
  stage,
  microBatch,
});

function custom(ranks: number, m: number, actions: Action[][], stagesPerRank = 1): Schedule {
  return {
    name: "custom",
    ranks,
    microBatches: m,
    stagesPerRank,
    stageToRank: Array.from({ length: ranks * stagesPerRank }, (_, s) => s % ranks),
    actions,
  };
}

Deno.test("simulate: 1F1B at p=4, m=8 with default costs has bubble 3/11 (the module example)", () => {
  const r = simulate(generateSchedule("1f1b", { ranks: 4, microBatches: 8 }));
  assert.equal(r.makespan, 33);
  assert.ok(Math.abs(r.bubbleFraction - 3 / 11) < 1e-12);
  assert.equal(r.bubbleFraction.toFixed(3), "0.273");
  assert.deepEqual(r.busy, [24, 24, 24, 24]);
  assert.deepEqual(r.idle, [9, 9, 9, 9]);
  assert.equal(r.iterations, 1);
  assert.equal(r.steadyStateBubble, undefined);
});

Deno.test("simulate: hand-computed 1F1B p=2, m=2 with a communication delay of 0.5", () => {
  // rank 0: F0 [0,1] F1 [1,2] B0 [5,7] (waits for rank 1's B0 at 4.5 + 0.5) B1 [8,10]
  // rank 1: F0 [1.5,2.5] B0 [2.5,4.5] F1 [4.5,5.5] B1 [5.5,7.5]
  const r = simulate(generateSchedule("1f1b", { ranks: 2, microBatches: 2 }), { comm: 0.5 });
  const times = (rank: number) =>
    r.events.filter((e) => e.rank === rank).map((e) => [e.start, e.end]);
  assert.deepEqual(times(0), [[0, 1], [1, 2], [5, 7], [8, 10]]);
  assert.deepEqual(times(1), [[1.5, 2.5], [2.5, 4.5], [4.5, 5.5], [5.5, 7.5]]);
  assert.equal(r.makespan, 10);
  assert.deepEqual(r.busy, [6, 6]);
  assert.deepEqual(r.idle, [4, 4]);
  assert.ok(Math.abs(r.bubbleFraction - 0.4) < 1e-12);
});

Deno.test("simulate: events obey every dependency and start as early as they may (all schedules)", () => {
  const cases = [
    { costs: UNIT, comm: 0, iterations: 1 },
    { costs: { F: 1, I: 1.2, W: 0.8, B: 2 }, comm: 0.3, iterations: 3 },
    { costs: { F: 0.7, I: 1.5, W: 0.4, B: 1.6 }, comm: 1, iterations: 2 },
  ];
  for (const name of SCHEDULE_NAMES) {
    for (const [p, m] of [[1, 3], [2, 4], [3, 6], [4, 10], [5, 12]]) {
      for (const c of cases) {
        const s = generateSchedule(name, { ranks: p, microBatches: m });
        const r = simulate(s, { costs: c.costs, comm: c.comm, iterations: c.iterations });
        checkEvents(s, r.events, c.costs, c.comm, c.iterations);
        const ends = r.events.map((e) => e.end);
        assert.equal(r.makespan, Math.max(...ends));
        for (let i = 1; i < r.events.length; i++) {
          assert.ok(r.events[i - 1].start <= r.events[i].start, "events sorted by start");
        }
        for (let q = 0; q < p; q++) {
          const mine = r.events.filter((e) => e.rank === q);
          const busy = mine.reduce((t, e) => t + e.end - e.start, 0);
          assert.ok(Math.abs(r.busy[q] - busy) < 1e-9);
          assert.ok(Math.abs(r.idle[q] - (r.makespan - busy)) < 1e-9);
        }
        const total = r.busy.reduce((x, y) => x + y, 0);
        assert.ok(Math.abs(r.bubbleFraction - (1 - total / (p * r.makespan))) < 1e-12);
      }
    }
  }
});

Deno.test("simulate: cost defaults (F = I = W = 1, B = I + W; I = B − W when only B is given)", () => {
  const s = generateSchedule("1f1b", { ranks: 1, microBatches: 1 });
  assert.equal(simulate(s).makespan, 3);
  assert.equal(simulate(s, { costs: { I: 2, W: 0.5 } }).makespan, 3.5);
  assert.equal(simulate(s, { costs: { F: 2, B: 5 } }).makespan, 7);
  const split = generateSchedule("zb-h1", { ranks: 1, microBatches: 1 });
  const r = simulate(split, { costs: { B: 3, W: 1 } }); // I = 2
  assert.deepEqual(r.events.map((e) => e.end - e.start), [1, 2, 1]);
});

Deno.test("simulate: per-stage cost arrays set each stage's durations", () => {
  const s = generateSchedule("gpipe", { ranks: 2, microBatches: 2 });
  const costs = { F: [1, 3], B: [2, 4] };
  const r = simulate(s, { costs });
  for (const e of r.events) {
    const want = e.action.kind === "F" ? costs.F[e.action.stage] : costs.B[e.action.stage];
    assert.equal(e.end - e.start, want);
  }
  // Stage 1 is the bottleneck: F chain 1, 3, 3 then B 4, 4, then stage 0's last B.
  assert.equal(r.makespan, 1 + 3 + 3 + 4 + 4 + 2);
});

Deno.test("simulate: consecutive iterations of GPipe and 1F1B do not interlock (steady state = single)", () => {
  for (const name of ["gpipe", "1f1b"]) {
    for (const [p, m] of [[2, 3], [4, 8], [6, 5]]) {
      const s = generateSchedule(name, { ranks: p, microBatches: m });
      const one = simulate(s);
      const many = simulate(s, { iterations: 3 });
      assert.equal(many.period, one.makespan);
      assert.ok(Math.abs(many.steadyStateBubble! - one.bubbleFraction) < 1e-12);
      assert.equal(many.makespan, 3 * one.makespan);
      assert.equal(many.events.length, 3 * one.events.length);
    }
  }
});

Deno.test("simulate: ZB-H2 iterations interlock as a parallelogram: K iterations take 3mK + p − 1", () => {
  for (const [p, m] of [[2, 4], [4, 8], [4, 13], [8, 16]]) {
    const s = generateSchedule("zb-h2", { ranks: p, microBatches: m });
    for (const K of [2, 3, 5]) {
      const r = simulate(s, { iterations: K });
      assert.equal(r.makespan, 3 * m * K + p - 1);
      assert.equal(r.period, 3 * m);
      assert.equal(r.steadyStateBubble, 0);
    }
  }
});

Deno.test("simulate: peak activations count F starts against B or W ends, in list order", () => {
  const s = custom(1, 3, [[
    a("F", 0, 0),
    a("F", 0, 1),
    a("I", 0, 0), // I does not free: W still reads the layer inputs
    a("F", 0, 2),
    a("W", 0, 0),
    a("B", 0, 1),
    a("I", 0, 2),
    a("W", 0, 2),
  ]]);
  assert.deepEqual(simulate(s).peakActivations, [3]);
  const gp = simulate(generateSchedule("gpipe", { ranks: 3, microBatches: 5 }));
  assert.deepEqual(gp.peakActivations, [5, 5, 5]);
});

Deno.test("simulate: bad options and schedules throw before any work", () => {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  assert.throws(
    () => simulate(s, { iterations: 0 }),
    /iterations must be a positive integer, got 0/,
  );
  assert.throws(() => simulate(s, { iterations: 1.5 }), RangeError);
  assert.throws(() => simulate(s, { comm: -1 }), /comm must be a finite number >= 0, got -1/);
  assert.throws(() => simulate(s, { comm: NaN }), RangeError);
  assert.throws(
    () => simulate(s, { costs: { F: -1 } }),
    /costs\.F must be a finite number >= 0, got -1/,
  );
  assert.throws(
    () => simulate(s, { costs: { B: [1, 2, 3] } }),
    /costs\.B must have one entry per stage \(2\), got 3/,
  );
  assert.throws(() => simulate(s, { costs: { W: [1, -2] } }), /costs\.W\[1\]/);
  assert.throws(() => simulate(s, { costs: { F: "2" as unknown as number } }), TypeError);
  assert.throws(() => simulate(s, { costs: { B: 0.5 } }), /costs\.I defaults to B − W/);
  assert.throws(() => simulate(s, null as unknown as object), TypeError);
  assert.throws(() => simulate({ ...s, ranks: 0 }), /ranks must be a positive integer, got 0/);
  const deadlock = custom(2, 1, [[a("B", 0, 0), a("F", 0, 0)], [a("F", 1, 0), a("B", 1, 0)]]);
  assert.throws(() => simulate(deadlock), ScheduleDeadlockError);
});

Deno.test("simulate: a misspelt option or cost kind is refused naming the one it resembles (it would be ignored)", () => {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
  assert.throws(
    () => simulate(s, { iteration: 3 } as never),
    /^TypeError: simulate: unknown option iteration: did you mean iterations\?/,
  );
  assert.throws(
    () => simulate(s, { costs: { f: 2 } } as never),
    /^TypeError: costs: unknown option f: did you mean F\?/,
  );
  assert.throws(
    () => simulate(s, { dataparallel: 2 } as never),
    /did you mean dataParallel\?/,
  );
  // Other keys are left alone: a caller may pass a wider object.
  assert.equal(simulate(s, { note: "mine" } as never).makespan, simulate(s).makespan);
});
