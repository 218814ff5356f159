// The step predicted with contention between ranks (predictStep's
// `together`): timelines worked out by hand, and its limits.
import assert from "node:assert/strict";
import { planCandidate, predictStep } from "../../src/advise/step_prediction.ts";
import { contendedTime } from "../../src/advise/_contention.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../src/pipeline/schedule/generate.ts";

const zero = { actionMs: 0, handOverMs: 0 };
// Two stages, F = f and B = b (I = W = b / 2), no optimizer step.
const two = (f: number, b: number) => ({
  F: [f, f],
  I: [b / 2, b / 2],
  W: [b / 2, b / 2],
  B: [b, b],
  step: [0, 0],
});
const close = (a: number, b: number, what: string) =>
  assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} != ${b}`);

Deno.test("contention: GPipe at P = 2, m = 2, twice as slow together, by hand", () => {
  // Alone: F 1, B 2; together: F 2, B 4. Rank 0: F0 [0, 1] alone; then F0(mb 1) and
  // F1(mb 0) together, each 2 long: [1, 3]; F1(mb 1) alone [3, 4]; B1, B1 alone [4, 6],
  // then B1(mb 1) beside B0(mb 0) together [6, 10]; the last B0 alone [10, 12].
  const s = generateSchedule("gpipe", { ranks: 2, microBatches: 2 });
  const p = predictStep(s, two(1, 2), zero, { together: two(2, 4) });
  close(p.firstStepMs, 12, "first step");
  // Without contention: 9 alone, 18 together.
  close(predictStep(s, two(1, 2), zero).firstStepMs, 9, "alone");
  close(predictStep(s, two(2, 4), zero).firstStepMs, 18, "together");
});

Deno.test("contention: an action overlapped for part of its work, with a hand-over delay", () => {
  // F alone 1, together 3; B costs nothing; hand-over 0.5. Rank 0: F0(mb 0) [0, 1].
  // F0(mb 1) starts at 1 alone; F1(mb 0) joins at 1.5 (half of F0(mb 1) done):
  // the other half takes 1.5 together, ending at 3; F1(mb 0) did 1.5 / 3 = half by
  // then, the rest alone: [1.5, 3.5]. F1(mb 1) arrives at 3.5: [3.5, 4.5]. The Bs
  // cost nothing: B1s at 4.5, B0s after the hand-over at 5.
  const s = generateSchedule("gpipe", { ranks: 2, microBatches: 2 });
  const p = predictStep(s, two(1, 0), { actionMs: 0, handOverMs: 0.5 }, { together: two(3, 0) });
  close(p.firstStepMs, 5, "first step");
  // Each F took (1 − f)·alone + f·together with f its overlapped share of work:
  // F0(mb 1) 0.5·1 + 0.5·3 = 2, as its span [1, 3].
});

Deno.test("contention: equal alone and together costs give the plain prediction", () => {
  for (const name of SCHEDULE_NAMES) {
    if (name === "zb-auto") continue;
    let s;
    try {
      s = generateSchedule(name, { ranks: 2, microBatches: 8 });
    } catch {
      continue;
    }
    const S = s.stageToRank.length;
    const c = {
      F: Array.from({ length: S }, (_, i) => 1 + 0.1 * i),
      I: new Array(S).fill(1.2),
      W: new Array(S).fill(0.7),
      B: new Array(S).fill(1.9),
      step: new Array(S).fill(2),
    };
    const o = { actionMs: 0, handOverMs: 0.3 };
    const plain = predictStep(s, c, o);
    const same = predictStep(s, c, o, { together: c });
    close(same.stepMs, plain.stepMs, `${name} stepMs`);
    close(same.bubble, plain.bubble, `${name} bubble`);
  }
});

Deno.test("contention: between the all-alone and the all-together prediction; full overlap is all-together", () => {
  const scale = (c: ReturnType<typeof two>, k: number) => ({
    F: c.F.map((x) => k * x),
    I: c.I.map((x) => k * x),
    W: c.W.map((x) => k * x),
    B: c.B.map((x) => k * x),
    step: c.step.map((x) => k * x),
  });
  for (const name of ["gpipe", "1f1b", "zb-h1", "zb-h2"]) {
    const s = generateSchedule(name, { ranks: 2, microBatches: 8 });
    const c = two(1, 2);
    const alone = predictStep(s, c, zero).stepMs;
    const together = predictStep(s, scale(c, 1.5), zero).stepMs;
    const mixed = predictStep(s, c, zero, { together: scale(c, 1.5) }).stepMs;
    assert.ok(alone < mixed && mixed <= together + 1e-9, `${name}: ${alone} ${mixed} ${together}`);
  }
  // ZB-H2's steady state keeps both ranks busy all the time (no bubble): its period
  // is the together one, 1.5 × 3m.
  const h2 = generateSchedule("zb-h2", { ranks: 2, microBatches: 8 });
  const c = { F: [1, 1], I: [1, 1], W: [1, 1], B: [2, 2], step: [0, 0] };
  close(predictStep(h2, c, zero, { together: scale(c, 1.5) }).stepMs, 36, "zb-h2 period");
});

Deno.test("contention: one rank never contends; n of P busy interpolates linearly", () => {
  const s = generateSchedule("1f1b", { ranks: 1, microBatches: 4 });
  const c = { F: [1], I: [1], W: [1], B: [2], step: [0] };
  const slow = { F: [9], I: [9], W: [9], B: [18], step: [0] };
  assert.equal(predictStep(s, c, zero, { together: slow }).stepMs, 12);
  assert.equal(contendedTime(2, 4, 1, 3), 2);
  assert.equal(contendedTime(2, 4, 2, 3), 3);
  assert.equal(contendedTime(2, 4, 3, 3), 4);
  assert.equal(contendedTime(2, 4, 2, 2), 4);
});

Deno.test("contention: together tables are checked before any work", () => {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
  assert.throws(
    () => predictStep(s, two(1, 2), zero, { together: { ...two(1, 2), F: [1] } }),
    (e) =>
      e instanceof RangeError && /together\.F must hold one cost per stage \(2\)/.test(e.message),
  );
  assert.throws(
    () => predictStep(s, two(1, 2), zero, { together: { ...two(1, 2), W: [1, -1] } }),
    (e) => e instanceof RangeError && /together\.W\[1\]/.test(e.message),
  );
  assert.throws(
    () => predictStep(s, two(1, 2), zero, { iterations: 1 }),
    (e) => e instanceof RangeError && /iterations/.test(e.message),
  );
});

Deno.test("planCandidate with together times: balances and costs them, predicts with contention", () => {
  const t = (ms: number) => ({ median: ms });
  // Alone the layers weigh 1, 1, 1, 3; together the first three slow to 2 each.
  const alone = [1, 1, 1, 3].map((ms) => ({ F: t(ms), I: t(ms), W: t(ms) }));
  const busy = [2, 2, 2, 3].map((ms) => ({ F: t(ms), I: t(ms), W: t(ms) }));
  const a = planCandidate("1f1b", 2, 4, alone, zero);
  assert.deepEqual(a.partition.boundaries, [0, 3, 4]);
  assert.equal(a.together, undefined);
  const b = planCandidate("1f1b", 2, 4, alone, zero, 0, { layers: busy });
  assert.deepEqual(b.partition.boundaries, [0, 2, 4]); // loads 6 + 6 against 6 + 9
  assert.deepEqual(b.costs.F, [2, 4]);
  assert.deepEqual(b.together!.F, [4, 5]);
  assert.throws(
    () => planCandidate("1f1b", 2, 4, alone, zero, 0, { layers: busy.slice(1) }),
    (e) =>
      e instanceof RangeError &&
      /together\.layers must hold one time per layer \(4\)/.test(e.message),
  );
});

Deno.test("contention: every action does exactly its work, at the alone rate alone and the together rate overlapped", async () => {
  const { simulateContention } = await import("../../src/advise/_contention.ts");
  for (
    const name of ["gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b", "zb-v", "dualpipe-v"]
  ) {
    const s = generateSchedule(name, { ranks: 2, microBatches: 6 });
    const S = s.stageToRank.length;
    const per = (base: number) => Array.from({ length: S }, (_, i) => base + 0.37 * i);
    const alone = { F: per(1), I: per(1.3), W: per(0.6), B: per(1.9) };
    const k = { F: 1.8, I: 1.3, W: 1.5, B: 1.4 };
    const together = {
      F: alone.F.map((x) => k.F * x),
      I: alone.I.map((x) => k.I * x),
      W: alone.W.map((x) => k.W * x),
      B: alone.B.map((x) => k.B * x),
    };
    const events = simulateContention(s, alone, together, 0.25, 3);
    assert.equal(events.length, 3 * s.actions.flat().length);
    for (const e of events) {
      const d = e.end - e.start;
      let o = 0;
      for (const x of events) {
        if (x.rank !== e.rank) {
          o += Math.max(
            0,
            Math.min(x.end, e.end) - Math.max(x.start, e.start),
          );
        }
      }
      const a = alone[e.action.kind][e.action.stage];
      const c = together[e.action.kind][e.action.stage];
      // Work done: alone-time share at rate 1/a plus overlapped share at rate 1/c.
      close(
        (d - o) / a + o / c,
        1,
        `${name} ${e.action.kind}${e.action.stage} mb ${e.action.microBatch}`,
      );
    }
  }
});
