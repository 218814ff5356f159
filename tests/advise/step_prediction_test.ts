import assert from "node:assert/strict";
import {
  layerLoads,
  planCandidate,
  predictStep,
  stageCosts,
} from "../../src/advise/step_prediction.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../src/pipeline/schedule/generate.ts";

const t = (ms: number) => ({ median: ms });
const uniform = (n: number, f: number, i: number, w: number) =>
  Array.from({ length: n }, () => ({ F: t(f), I: t(i), W: t(w) }));
const zero = { actionMs: 0, handOverMs: 0 };

Deno.test("predictStep: GPipe and 1F1B with equal costs give (m + p − 1)(F + B) per step", () => {
  for (const name of ["gpipe", "1f1b"]) {
    for (const [p, m] of [[2, 4], [4, 8]]) {
      const s = generateSchedule(name, { ranks: p, microBatches: m });
      const c = { F: new Array(p).fill(1), I: new Array(p).fill(1), W: new Array(p).fill(1) };
      const r = predictStep(s, { ...c, B: new Array(p).fill(2), step: new Array(p).fill(0) }, zero);
      assert.equal(r.firstStepMs, (m + p - 1) * 3, `${name} p=${p} m=${m}`);
      // Bubble of one step: (p − 1)/(m + p − 1) (the reference sheet).
      assert.ok(Math.abs(r.bubble - (p - 1) / (m + p - 1)) < 1e-9, `${name} bubble ${r.bubble}`);
    }
  }
});

Deno.test("predictStep: ZB-H2's steady state has no bubble; the hand-over delay adds to the ramps", () => {
  const p = 4, m = 8;
  const s = generateSchedule("zb-h2", { ranks: p, microBatches: m });
  const one = (v: number) => new Array(p).fill(v);
  const c = { F: one(1), I: one(1), W: one(1), B: one(2), step: one(0) };
  const r = predictStep(s, c, zero, 8);
  assert.ok(Math.abs(r.stepMs - 3 * m) < 1e-9, `period ${r.stepMs}`);
  assert.ok(r.bubble < 1e-9);
  const slow = predictStep(generateSchedule("gpipe", { ranks: p, microBatches: m }), c, {
    actionMs: 0,
    handOverMs: 0.5,
  });
  // GPipe: each of the 2(p − 1) hops of the ramps waits 0.5; the streams behind them do not.
  assert.ok(Math.abs(slow.firstStepMs - ((m + p - 1) * 3 + 2 * (p - 1) * 0.5)) < 1e-9);
});

Deno.test("predictStep: a stage's optimizer step adds its time to the rank's busy time once per step", () => {
  const s = generateSchedule("1f1b", { ranks: 1, microBatches: 4 });
  const base = { F: [1], I: [1], W: [1], B: [2], step: [0] };
  const a = predictStep(s, base, zero);
  const b = predictStep(s, { ...base, step: [6] }, zero);
  assert.equal(a.stepMs, 12);
  assert.equal(b.stepMs, 18);
  // In a split schedule it goes with the W actions.
  const h = generateSchedule("zb-h1", { ranks: 1, microBatches: 4 });
  assert.equal(predictStep(h, { ...base, step: [6] }, zero).stepMs, 18);
});

Deno.test("predictStep: each rank's busy time holds every one of its stages' optimizer steps, whatever mix of B and W its schedule runs", () => {
  // DualPipeV runs most micro-batches of a stage as B and a few as I + W:
  // the step must still be counted in full, once per stage.
  for (const name of SCHEDULE_NAMES) {
    const p = 2, m = 8;
    let s;
    try {
      s = generateSchedule(name, { ranks: p, microBatches: m });
    } catch {
      continue; // a schedule that needs other shapes
    }
    const S = s.stageToRank.length;
    const c = {
      F: new Array(S).fill(1),
      I: new Array(S).fill(1),
      W: new Array(S).fill(1),
      B: new Array(S).fill(2),
    };
    const plain = predictStep(s, { ...c, step: new Array(S).fill(0) }, zero).costs;
    const stepped = predictStep(s, { ...c, step: new Array(S).fill(4) }, zero).costs;
    s.actions.forEach((list, r) => {
      const busy = (k: typeof plain) =>
        list.reduce((a, x) => a + (k[x.kind] as number[])[x.stage], 0);
      const held = s.stageToRank.filter((x) => x === r).length;
      assert.ok(
        Math.abs(busy(stepped) - busy(plain) - 4 * held) < 1e-9,
        `${name} rank ${r}: ${busy(stepped) - busy(plain)} ms of steps, want ${4 * held}`,
      );
    });
  }
});

Deno.test("stageCosts and layerLoads: sums per stage by hand", () => {
  const layers = [
    { F: t(1), I: t(2), W: t(3), step: t(8) },
    { F: t(4), I: t(5), W: t(6) },
    { F: t(7), I: t(8), W: t(9), step: t(4) },
  ];
  const c = stageCosts(layers, [0, 2, 3], { lossMs: 10, actionMs: 0.5 });
  assert.deepEqual(c.F, [1 + 4 + 0.5, 7 + 10 + 0.5]);
  assert.deepEqual(c.I, [2 + 5 + 0.5, 8 + 0.5]);
  assert.deepEqual(c.W, [3 + 6 + 0.5, 9 + 0.5]);
  assert.deepEqual(c.B, [2 + 5 + 3 + 6 + 0.5, 8 + 9 + 0.5]);
  assert.deepEqual(c.step, [8, 4]);
  assert.deepEqual(layerLoads(layers, 4, 10), [1 + 2 + 3 + 2, 4 + 5 + 6, 7 + 8 + 9 + 1 + 10]);
  assert.throws(() => stageCosts(layers, [0, 3, 3]), /rise strictly from 0 to the layer count 3/);
  assert.throws(() => stageCosts([{ F: t(-1), I: t(0), W: t(0) }], [0, 1]), /F\.median/);
  assert.throws(() => layerLoads(layers, 0), /microBatches must be a positive integer, got 0/);
});

Deno.test("planCandidate: min-max partition of the measured loads; V stages for V schedules", () => {
  const layers = [
    { F: t(1), I: t(1), W: t(1) },
    { F: t(1), I: t(1), W: t(1) },
    { F: t(1), I: t(1), W: t(1) },
    { F: t(3), I: t(3), W: t(3) },
  ];
  // Loads 3, 3, 3, 9 (+3 loss): best cut of 2 is [0, 3) | [3, 4): 9 against 12.
  const c = planCandidate("1f1b", 2, 4, layers, zero, 3);
  assert.deepEqual(c.partition.boundaries, [0, 3, 4]);
  assert.deepEqual(c.costs.F, [3, 6]);
  const v = planCandidate("zb-v", 2, 4, uniform(8, 1, 1, 1), zero);
  assert.deepEqual(v.partition.boundaries, [0, 2, 4, 6, 8]);
  assert.equal(v.schedule.stagesPerRank, 2);
  // More stages than layers: refused with the counts.
  assert.throws(
    () => planCandidate("zb-v", 2, 4, uniform(3, 1, 1, 1), zero),
    /4 stages, more than the model's 3 layers/,
  );
  // zb-auto finds its schedule from the same costs, every schedule name plans.
  for (const name of SCHEDULE_NAMES) {
    const p = planCandidate(name, 2, 8, uniform(8, 1, 1, 1), zero);
    assert.equal(p.partition.boundaries.length, p.schedule.stageToRank.length + 1, name);
  }
});

Deno.test("stageCosts with factors: each kind's sum scaled, B by its own factor or by its parts'", () => {
  const layers = [
    { F: t(1), I: t(2), W: t(4), step: t(8) },
    { F: t(3), I: t(1), W: t(1) },
  ];
  const f = { F: 2, I: 3, W: 0.5, B: 1.5 };
  const c = stageCosts(layers, [0, 1, 2], { lossMs: 1, actionMs: 0.25, factors: f });
  assert.deepEqual(c.F, [1 * 2 + 0.25, (3 + 1) * 2 + 0.25]);
  assert.deepEqual(c.I, [2 * 3 + 0.25, 1 * 3 + 0.25]);
  assert.deepEqual(c.W, [4 * 0.5 + 0.25, 1 * 0.5 + 0.25]);
  assert.deepEqual(c.B, [(2 + 4) * 1.5 + 0.25, (1 + 1) * 1.5 + 0.25]);
  assert.deepEqual(c.step, [8, 0]); // the optimizer step is not scaled
  const parts = stageCosts(layers, [0, 2], { factors: { F: 1, I: 3, W: 0.5 } });
  assert.deepEqual(parts.B, [(2 + 1) * 3 + (4 + 1) * 0.5]);
  // Factors 1 and no B factor: the plain sums.
  assert.deepEqual(
    stageCosts(layers, [0, 1, 2], { lossMs: 1, factors: { F: 1, I: 1, W: 1 } }),
    stageCosts(layers, [0, 1, 2], { lossMs: 1 }),
  );
  assert.throws(
    () => stageCosts(layers, [0, 2], { factors: { F: -1, I: 1, W: 1 } }),
    /factors.F must be a finite number >= 0, got -1/,
  );
});

Deno.test("planCandidate with factors: the cut and the costs both take the calibrated times", () => {
  // Loads alone 3, 3, 3, 3 → cut [0, 2, 4]; with F ×5 the first two layers
  // (F-heavy) weigh 1·5 + 1 + 1 = 7 each against 3 for the others.
  const layers = [
    { F: t(1), I: t(1), W: t(1) },
    { F: t(1), I: t(1), W: t(1) },
    { F: t(0), I: t(1.5), W: t(1.5) },
    { F: t(0), I: t(1.5), W: t(1.5) },
  ];
  const over = { actionMs: 0.5, handOverMs: 0.1 };
  const plain = planCandidate("1f1b", 2, 4, layers, over);
  assert.deepEqual(plain.partition.boundaries, [0, 2, 4]);
  const f = { F: 5, I: 1, W: 1, B: 2 };
  const cal = planCandidate("1f1b", 2, 4, layers, over, 0, undefined, f);
  assert.deepEqual(cal.partition.boundaries, [0, 1, 4]); // 7 against 7 + 3 + 3
  assert.deepEqual(cal.costs, stageCosts(layers, [0, 1, 4], { actionMs: 0.5, factors: f }));
  assert.equal(cal.together, undefined);
  assert.throws(
    () => planCandidate("1f1b", 2, 4, layers, over, 0, { layers }, f),
    /factors and together exclude each other/,
  );
});

Deno.test("predictStep: the per-step runtime cost is shared among a rank's stages", () => {
  // Interleaved 1F1B holds two stages per rank: 6 per step on each rank as 3 per stage.
  const s = generateSchedule("interleaved-1f1b", { ranks: 2, microBatches: 4 });
  const c = { F: [1, 1, 1, 1], I: [1, 1, 1, 1], W: [1, 1, 1, 1], B: [2, 2, 2, 2] };
  const withSteps = predictStep(s, { ...c, step: [3, 3, 3, 3] }, zero);
  const withCost = predictStep(s, { ...c, step: [0, 0, 0, 0] }, { ...zero, stepMs: 6 });
  assert.equal(withCost.stepMs, withSteps.stepMs);
  assert.deepEqual(withCost.costs, withSteps.costs);
  assert.throws(
    () => predictStep(s, { ...c, step: [0, 0, 0, 0] }, { ...zero, stepMs: -1 }),
    /overheads.stepMs must be a finite number of ms >= 0, got -1/,
  );
});
