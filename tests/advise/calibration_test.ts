import assert from "node:assert/strict";
import { fitCalibration, fitStepOverhead } from "../../src/advise/calibration.ts";
import { predictStep } from "../../src/advise/step_prediction.ts";
import { generateSchedule } from "../../src/pipeline/schedule/generate.ts";
import type { Schedule, TimedEvent } from "../../src/pipeline/schedule/schedule.ts";
import type { Action } from "../../src/pipeline/schedule/action.ts";

const NONE = { actionMs: 0.25, handOverMs: 0.5 };
const near = (a: number, b: number, what: string) =>
  assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} vs ${b}`);

function ev(
  rank: number,
  kind: Action["kind"],
  stage: number,
  mb: number,
  start: number,
  end: number,
  iteration = 0,
): TimedEvent {
  return { rank, action: { kind, stage, microBatch: mb }, iteration, start, end };
}

// 1F1B at 2 ranks, 2 micro-batches: rank 0 F0 F1 B0 B1, rank 1 F0 B0 F1 B1.
// Profiled F 10, B 20 on both stages. Rank 0's F take 12 ms, rank 1's 14;
// every B 30. 1 ms between a rank's actions when their input is there; a
// rank waiting on the other starts 3 ms after the other's action ends.
const ONE_F_ONE_B = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
const PROFILED = { F: [10, 10], I: [12, 12], W: [8, 8], B: [20, 20], step: [5, 5] };
const SPANS = [
  ev(0, "F", 0, 0, 0, 12),
  ev(0, "F", 0, 1, 13, 25), // gap 1 (stage 0 needs nothing)
  ev(1, "F", 1, 0, 15, 29), // its rank's first action: no pair
  ev(1, "B", 1, 0, 30, 60), // gap 1 (the last stage's B needs its own F)
  ev(1, "F", 1, 1, 61, 75), // gap 1 (rank 0's F1 ended at 25, before B0 started at 30)
  ev(0, "B", 0, 0, 63, 93), // waited: rank 1's B0 ended at 60 → 3
  ev(1, "B", 1, 1, 76, 106), // gap 1
  ev(0, "B", 0, 1, 109, 139), // waited: rank 1's B1 ended at 106 → 3
];

Deno.test("fitCalibration: per kind, the median ratio of span to profiled cost, by stage and its spread", () => {
  const fit = fitCalibration([{ schedule: ONE_F_ONE_B, profiled: PROFILED, events: SPANS }], NONE);
  // F ratios 1.2, 1.2 (stage 0), 1.4, 1.4 (stage 1): median 1.3; quartiles 1.2 and 1.4.
  near(fit.kinds.F!.factor, 1.3, "F");
  near(fit.kinds.F!.spread, 0.2 / 1.3, "F spread");
  assert.equal(fit.kinds.F!.samples, 4);
  near(fit.kinds.F!.byStage[0]!, 1.2, "F stage 0");
  near(fit.kinds.F!.byStage[1]!, 1.4, "F stage 1");
  assert.equal(fit.kinds.B!.factor, 1.5);
  assert.equal(fit.kinds.B!.spread, 0);
  assert.equal(fit.kinds.I, undefined);
  assert.equal(fit.kinds.W, undefined);
  // I and W not measured: the B factor.
  assert.deepEqual(fit.factors, { F: fit.kinds.F!.factor, I: 1.5, W: 1.5, B: 1.5 });
  // Gaps 1, 1, 1, 1; waits 3, 3 → hand-over 3 − 1.
  assert.equal(fit.actionSamples, 4);
  assert.equal(fit.handOverSamples, 2);
  assert.deepEqual(fit.overheads, { actionMs: 1, handOverMs: 2 });
});

Deno.test("fitCalibration: I and W measured apart, zero-cost stages skipped, runs pooled", () => {
  const zb = generateSchedule("zb-h1", { ranks: 2, microBatches: 2 });
  // Spans on a timeline that only this test reads: each action's own span.
  const profiled = { F: [10, 10], I: [10, 0], W: [5, 5], B: [15, 5], step: [0, 0] };
  const events: TimedEvent[] = [];
  let t = 0;
  zb.actions.forEach((list, rank) => {
    for (const a of list) {
      const d = a.kind === "F" ? 11 : a.kind === "I" ? 20 : 6; // F 1.1, I 2 (stage 0), W 1.2
      events.push(ev(rank, a.kind, a.stage, a.microBatch, t, t + d));
      t += d + 100; // far apart: every remote input long there
    }
  });
  const fit = fitCalibration([
    { schedule: zb, profiled, events },
    { schedule: ONE_F_ONE_B, profiled: PROFILED, events: SPANS },
  ], NONE);
  assert.equal(fit.kinds.I!.samples, 2); // stage 1's I is profiled at 0: skipped
  assert.equal(fit.kinds.I!.factor, 2);
  assert.deepEqual(fit.kinds.I!.byStage, [2, null]);
  near(fit.kinds.W!.factor, 1.2, "W");
  assert.equal(fit.kinds.F!.samples, 8); // 4 from each run
  // F ratios 1.1 ×4, 1.2 ×2, 1.4 ×2: median 1.15.
  near(fit.kinds.F!.factor, 1.15, "F pooled");
  assert.equal(fit.factors.B, 1.5);
  assert.equal(fit.factors.I, 2);
});

Deno.test("fitCalibration: the gap after a stage's last backward (its optimizer step) is no runtime cost", () => {
  // One rank holding two stages: F(0) F(1) B(1) B(0); the optimizer step of
  // stage 1 runs between B(1) and B(0).
  const schedule: Schedule = {
    name: "custom",
    ranks: 1,
    microBatches: 1,
    stagesPerRank: 2,
    stageToRank: [0, 0],
    actions: [[
      { kind: "F", stage: 0, microBatch: 0 },
      { kind: "F", stage: 1, microBatch: 0 },
      { kind: "B", stage: 1, microBatch: 0 },
      { kind: "B", stage: 0, microBatch: 0 },
    ]],
  };
  const events = [
    ev(0, "F", 0, 0, 0, 10),
    ev(0, "F", 1, 0, 12, 22),
    ev(0, "B", 1, 0, 24, 44),
    ev(0, "B", 0, 0, 94, 114),
    // The next iteration's first action: pairs do not cross iterations.
    ev(0, "F", 0, 0, 200, 210, 1),
  ];
  const profiled = { F: [10, 10], I: [10, 10], W: [10, 10], B: [20, 20], step: [0, 0] };
  const fit = fitCalibration([{ schedule, profiled, events }], NONE);
  assert.equal(fit.actionSamples, 2);
  assert.equal(fit.overheads.actionMs, 2);
  // No rank waited on another: the fallback hand-over.
  assert.equal(fit.handOverSamples, 0);
  assert.equal(fit.overheads.handOverMs, NONE.handOverMs);
  assert.deepEqual(fit.factors, { F: 1, I: 1, W: 1, B: 1 });
});

Deno.test("fitCalibration: bad runs are refused naming the value", () => {
  assert.throws(() => fitCalibration([], NONE), /runs must be a non-empty array/);
  assert.throws(
    () =>
      fitCalibration(
        [{ schedule: ONE_F_ONE_B, profiled: { ...PROFILED, F: [1] }, events: [] }],
        NONE,
      ),
    /runs\[0\]\.profiled\.F must hold one finite cost >= 0 per stage \(2\), got \[1\]/,
  );
  assert.throws(
    () =>
      fitCalibration([{
        schedule: ONE_F_ONE_B,
        profiled: PROFILED,
        events: [ev(0, "F", 2, 0, 0, 1)],
      }], NONE),
    /runs\[0\]\.events\[0\] must name a stage in \[0, 2\)/,
  );
  assert.throws(
    () =>
      fitCalibration([{
        schedule: ONE_F_ONE_B,
        profiled: PROFILED,
        events: [ev(0, "F", 0, 0, 5, 1)],
      }], NONE),
    /end at or after its start/,
  );
  assert.throws(
    () =>
      fitCalibration([{ schedule: ONE_F_ONE_B, profiled: PROFILED, events: [] }], {
        actionMs: -1,
        handOverMs: 0,
      }),
    /fallback.actionMs must be a finite number of ms >= 0, got -1/,
  );
});

Deno.test("fitStepOverhead: the per-step cost that makes the prediction meet the measured period", () => {
  // One rank, GPipe, 2 micro-batches: the period is the sum of the actions, plus the step's cost.
  const s = generateSchedule("gpipe", { ranks: 1, microBatches: 2 });
  const costs = { F: [2], I: [1], W: [1], B: [3], step: [1] };
  const base = predictStep(s, costs, { actionMs: 0, handOverMs: 0 }).stepMs;
  assert.equal(base, 2 + 2 + 3 + 3 + 1);
  near(predictStep(s, costs, { actionMs: 0, handOverMs: 0, stepMs: 4 }).stepMs, 15, "stepMs adds");
  near(
    fitStepOverhead([{ schedule: s, costs, measuredMs: 16.5 }], { actionMs: 0, handOverMs: 0 }),
    5.5,
    "fit",
  );
  // Two runs: their residuals 4 and 2 (with 0) meet on average at 3.
  const x = fitStepOverhead([
    { schedule: s, costs, measuredMs: 15 },
    { schedule: s, costs, measuredMs: 13 },
  ], { actionMs: 0, handOverMs: 0 });
  near(x, 3, "two runs");
  // Already as long: nothing added, never a negative cost.
  assert.equal(
    fitStepOverhead([{ schedule: s, costs, measuredMs: 5 }], { actionMs: 0, handOverMs: 0 }),
    0,
  );
  assert.throws(
    () =>
      fitStepOverhead([{ schedule: s, costs, measuredMs: NaN }], { actionMs: 0, handOverMs: 0 }),
    /runs\[0\]\.measuredMs must be a finite number >= 0, got NaN/,
  );
});
