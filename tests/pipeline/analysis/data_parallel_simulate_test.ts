import assert from "node:assert/strict";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { ringAllReduceTime } from "../../../src/pipeline/analysis/all_reduce.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import type { Action, ActionKind } from "../../../src/pipeline/schedule/action.ts";
import type { Schedule } from "../../../src/pipeline/schedule/schedule.ts";

const a = (kind: ActionKind, stage: number, microBatch: number): Action => ({
  kind,
  stage,
  microBatch,
});

const LINK = { latencyMs: 0.5, bytesPerMs: 100 };
const spans = (r: ReturnType<typeof simulate>) =>
  r.allReduce?.map((s) => [s.stage, s.rank, s.start, s.end, s.bytes]);

Deno.test("ringAllReduceTime: the ring formula, hand-computed", () => {
  // D = 2: 2·1/2 · 400/100 + 2·1 · 0.5 = 4 + 1 = 5.
  assert.equal(ringAllReduceTime(LINK, 400, 2), 5);
  // D = 4: 2·3/4 · 400/100 + 2·3 · 0.5 = 6 + 3 = 9; in units of 2 ms, 4.5.
  assert.equal(ringAllReduceTime(LINK, 400, 4), 9);
  assert.equal(ringAllReduceTime(LINK, 400, 4, 2), 4.5);
  // D = 8, 1 GB at 10 GB/s (1e7 bytes per ms), no latency: 2·7/8 · 100 ms = 175 ms.
  assert.equal(ringAllReduceTime({ latencyMs: 0, bytesPerMs: 1e7 }, 1e9, 8), 175);
  // Nothing to send: one replica, or no bytes.
  assert.equal(ringAllReduceTime(LINK, 400, 1), 0);
  assert.equal(ringAllReduceTime(LINK, 0, 4), 0);
  // A zero-copy link costs only its latency rounds.
  assert.equal(ringAllReduceTime({ latencyMs: 0.25, bytesPerMs: Infinity }, 1e6, 3), 1);
});

Deno.test("ringAllReduceTime: refuses a bad link, size, replica count or unit", () => {
  assert.throws(() => ringAllReduceTime(null as never, 1, 2), TypeError);
  assert.throws(() => ringAllReduceTime({ latencyMs: -1, bytesPerMs: 1 }, 1, 2), /latencyMs.*-1/);
  assert.throws(() => ringAllReduceTime({ latencyMs: 0, bytesPerMs: 0 }, 1, 2), /bytesPerMs.*0/);
  assert.throws(() => ringAllReduceTime(LINK, -4, 2), /bytes must be .*-4/);
  assert.throws(() => ringAllReduceTime(LINK, 4, 0), /replicas must be .*0/);
  assert.throws(() => ringAllReduceTime(LINK, 4, 2.5), RangeError);
  assert.throws(() => ringAllReduceTime(LINK, 4, 2, 0), /unitMs.*0/);
});

Deno.test("simulate, D = 2: 1F1B p=2, m=2, each stage's all-reduce after its last B (hand-computed)", () => {
  // rank 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]; rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7].
  // Stage 1 is done at 7: 400 bytes take 5, so 7..12, while rank 0 still runs B1 (7..9).
  // Stage 0 is done at 9: 100 bytes take 2·1/2 · 1 + 1 = 2, so 9..11. The step ends at 12.
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  const plain = simulate(s);
  const r = simulate(s, { dataParallel: 2, link: LINK, gradientBytes: [100, 400] });
  assert.deepEqual(spans(r), [[1, 1, 7, 12, 400], [0, 0, 9, 11, 100]]);
  assert.equal(r.makespan, 12);
  // The compute is the same as without data parallelism; busy counts compute only.
  assert.deepEqual(r.events, plain.events);
  assert.deepEqual(r.busy, [6, 6]);
  assert.deepEqual(r.idle, [6, 6]);
  assert.equal(r.bubbleFraction, 1 - 12 / (2 * 12));
  const b0 = r.events.find((e) =>
    e.rank === 0 && e.action.kind === "B" && e.action.microBatch === 1
  );
  assert.ok(
    b0 !== undefined && b0.start < 12 && b0.end > 7,
    "stage 1's all-reduce overlaps rank 0's B1",
  );
});

Deno.test("simulate, D = 4: the step ends at the later of the last action and the last all-reduce", () => {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  // 20 bytes at D = 4: 2·3/4 · 0.2 + 6 · 0.5 = 3.3; stage 0: 9..12.3, stage 1: 7..10.3.
  const r = simulate(s, { dataParallel: 4, link: LINK, gradientBytes: 20 });
  const got = spans(r)!;
  assert.deepEqual(got.map((x) => x.slice(0, 3)), [[1, 1, 7], [0, 0, 9]]);
  assert.ok(Math.abs((got[0][3] as number) - 10.3) < 1e-12);
  assert.ok(Math.abs(r.makespan - 12.3) < 1e-12);
  // Costs in units of 10 ms: each all-reduce lasts 0.33 units; stage 0's
  // starts at 9, so the step ends at 9.33.
  const u = simulate(s, { dataParallel: 4, link: LINK, gradientBytes: 20, unitMs: 10 });
  assert.ok(Math.abs(u.makespan - 9.33) < 1e-12, `${u.makespan}`);
  // No gradient bytes: nothing to send, the step is the plain makespan.
  const z = simulate(s, { dataParallel: 4, link: LINK, gradientBytes: [0, 0] });
  assert.equal(z.makespan, 9);
  assert.deepEqual(spans(z), [[1, 1, 7, 7, 0], [0, 0, 9, 9, 0]]);
});

Deno.test("simulate, D = 2: with an I/W split the all-reduce waits for the stage's last W", () => {
  // One rank, one stage: F0 [0,1] I0 [1,2] F1 [2,3] I1 [3,4] W0 [4,5] W1 [5,6].
  const s: Schedule = {
    name: "custom",
    ranks: 1,
    microBatches: 2,
    stagesPerRank: 1,
    stageToRank: [0],
    actions: [[a("F", 0, 0), a("I", 0, 0), a("F", 0, 1), a("I", 0, 1), a("W", 0, 0), a("W", 0, 1)]],
  };
  const r = simulate(s, { dataParallel: 2, link: LINK, gradientBytes: 400 });
  assert.deepEqual(spans(r), [[0, 0, 6, 11, 400]]);
  assert.equal(r.makespan, 11);
});

Deno.test("simulate, D = 2: two stages on one rank share its link, one all-reduce at a time", () => {
  // One rank holding stages 0 and 1: F0 [0,1] F1 [1,2] B1 [2,4] B0 [4,6].
  // Stage 1 is done at 4 (400 bytes: 4..9); stage 0 at 6, but the link is busy until 9: 9..11.
  const s: Schedule = {
    name: "custom",
    ranks: 1,
    microBatches: 1,
    stagesPerRank: 2,
    stageToRank: [0, 0],
    actions: [[a("F", 0, 0), a("F", 1, 0), a("B", 1, 0), a("B", 0, 0)]],
  };
  const r = simulate(s, { dataParallel: 2, link: LINK, gradientBytes: [100, 400] });
  assert.deepEqual(spans(r), [[1, 0, 4, 9, 400], [0, 0, 9, 11, 100]]);
  assert.equal(r.makespan, 11);
});

Deno.test("simulate: D = 1 or absent changes nothing, whatever else is given", () => {
  for (const name of SCHEDULE_NAMES) {
    const s = generateSchedule(name, { ranks: 2, microBatches: 4 });
    const plain = simulate(s, { costs: { F: 1, B: 3, W: 1 }, comm: 0.25 });
    const one = simulate(s, {
      costs: { F: 1, B: 3, W: 1 },
      comm: 0.25,
      dataParallel: 1,
      link: LINK,
      gradientBytes: 1e6,
    });
    assert.deepEqual(one, plain, name);
    assert.ok(!("allReduce" in plain) && !("allReduce" in one), name);
  }
});

Deno.test("simulate, D > 1: every generated schedule gets one all-reduce per stage, after its last backward", () => {
  for (const name of SCHEDULE_NAMES) {
    const s = generateSchedule(name, { ranks: 4, microBatches: 8 });
    const r = simulate(s, { dataParallel: 3, link: LINK, gradientBytes: 300 });
    const t = ringAllReduceTime(LINK, 300, 3);
    const got = r.allReduce!;
    assert.equal(got.length, s.stageToRank.length, name);
    assert.deepEqual(got.map((x) => x.stage).sort((p, q) => p - q), s.stageToRank.map((_, i) => i));
    let last = 0;
    for (const x of got) {
      const lastBackward = Math.max(
        ...r.events.filter((e) =>
          e.action.stage === x.stage && (e.action.kind === "B" || e.action.kind === "W")
        ).map((e) => e.end),
      );
      assert.equal(x.rank, s.stageToRank[x.stage], name);
      assert.ok(
        x.start >= lastBackward,
        `${name} stage ${x.stage} starts before its last backward`,
      );
      assert.ok(Math.abs(x.end - x.start - t) < 1e-9, name);
      last = Math.max(last, x.end);
    }
    assert.equal(r.makespan, Math.max(last, ...r.events.map((e) => e.end)), name);
  }
});

Deno.test("simulate, D > 1: refuses missing or bad options before any work", () => {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  assert.throws(
    () => simulate(s, { dataParallel: 0 }),
    /dataParallel must be a positive integer, got 0/,
  );
  assert.throws(() => simulate(s, { dataParallel: 1.5 }), RangeError);
  assert.throws(() => simulate(s, { dataParallel: 2, gradientBytes: 4 }), /needs a link/);
  assert.throws(() => simulate(s, { dataParallel: 2, link: LINK }), /needs gradientBytes/);
  assert.throws(
    () => simulate(s, { dataParallel: 2, link: LINK, gradientBytes: [1, 2, 3] }),
    /one number per stage \(2\), got 3 numbers/,
  );
  assert.throws(
    () => simulate(s, { dataParallel: 2, link: LINK, gradientBytes: [1, -2] }),
    /gradientBytes\[1\] must be a finite number >= 0, got -2/,
  );
  assert.throws(
    () =>
      simulate(s, { dataParallel: 2, link: { latencyMs: 0, bytesPerMs: -1 }, gradientBytes: 4 }),
    /bytesPerMs/,
  );
  assert.throws(
    () => simulate(s, { dataParallel: 2, link: LINK, gradientBytes: 4, unitMs: 0 }),
    /unitMs/,
  );
  assert.throws(
    () => simulate(s, { dataParallel: 2, link: LINK, gradientBytes: 4, iterations: 2 }),
    /iterations must be 1, got 2/,
  );
  // What is given is checked even with D = 1.
  assert.throws(() => simulate(s, { link: { latencyMs: NaN, bytesPerMs: 1 } }), /latencyMs/);
  assert.throws(() => simulate(s, { dataParallel: 1, gradientBytes: -1 }), /gradientBytes\[0\]/);
  assert.throws(() => simulate(s, { unitMs: -1 }), /unitMs/);
});
