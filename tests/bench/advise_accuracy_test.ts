// The accuracy bench's arithmetic: overlap of spans, schedules that cannot be
// told from the fastest, and the verdict's judgement of the first pick.
import assert from "node:assert/strict";
import {
  type AccuracyRow,
  accuracyVerdict,
  driftLine,
  indistinguishable,
  machineDrift,
  type ModelRun,
  overlapMs,
} from "../../bench/advise_accuracy.ts";

const row = (schedule: string, predictedMs: number, rounds: number[]): AccuracyRow => {
  const v = [...rounds].sort((a, b) => a - b);
  const measuredMs = v[v.length >> 1];
  return {
    model: "gpt",
    schedule,
    ranks: 2,
    microBatches: 8,
    boundaries: [0, 1, 2],
    predictedMs,
    predictedUncalibratedMs: predictedMs,
    uncalibratedError: measuredMs / predictedMs - 1,
    predictedAloneMs: predictedMs,
    predictedTogetherMs: predictedMs,
    togetherError: measuredMs / predictedMs - 1,
    measuredMs,
    measuredRoundsMs: rounds,
    error: measuredMs / predictedMs - 1,
    aloneError: measuredMs / predictedMs - 1,
    predictedBubble: 0.1,
    measuredBubble: 0.1,
    predictedActivationBytes: [100, 100],
    measuredActivationBytes: [100, 100],
    activationError: 0,
    busyAloneMs: [1, 1],
    busyTogetherMs: [1, 1],
    measuredBusyMs: [1, 1],
    measuredOverlap: [1, 1],
  };
};

Deno.test("overlapMs: the others' union intersected with each own span", () => {
  const own = [{ start: 0, end: 4 }, { start: 6, end: 10 }];
  // Others overlap each other on [2, 3]: counted once.
  const others = [{ start: 1, end: 3 }, { start: 2, end: 5 }, { start: 9, end: 12 }];
  assert.equal(overlapMs(own, others), 3 + 1); // [1, 4] and [9, 10]
  assert.equal(overlapMs(own, []), 0);
});

Deno.test("indistinguishable: schedules whose rounds' range meets the fastest's", () => {
  const rows = [
    row("a", 100, [100, 104, 98]), // fastest: median 100, range 98–104
    row("b", 100, [103, 110, 108]), // 103 ≤ 104: overlaps
    row("c", 100, [105, 112, 109]), // 105 > 104: apart
  ];
  assert.deepEqual(indistinguishable(rows), ["a", "b"]);
});

Deno.test("accuracyVerdict: a pick over 5% off passes only when indistinguishable, and says so", () => {
  const run = (pick: string, rows: AccuracyRow[]): ModelRun => ({
    model: "gpt",
    rows,
    pick,
    adviseSeconds: 10,
    spread: 0.1,
    calibration: "",
    drift: { runs: [], factor: 1 },
  });
  // b's median is 108 (8% off a's 100) but its range 95–112 meets a's 98–104.
  const close = [row("a", 100, [100, 104, 98]), row("b", 108, [108, 95, 112])];
  const v1 = accuracyVerdict([run("b", close)]);
  assert.match(v1, /^verdict: PASS/);
  assert.match(v1, /gpt pick b measured \+8\.0% off the fastest, indistinguishable from it/);
  const apart = [row("a", 100, [100, 104, 98]), row("b", 108, [108, 106, 112])];
  const v2 = accuracyVerdict([run("b", apart)]);
  assert.match(v2, /^verdict: FAIL/);
  assert.match(v2, /gpt pick b measured \+8\.0% off the fastest/);
  // A prediction more than 10% off fails.
  const off = [row("a", 80, [100, 104, 98])];
  assert.match(accuracyVerdict([run("a", off)]), /FAIL.*gpt a ms \+25\.0%/);
});

Deno.test("machineDrift: the geometric mean of the calibration schedules' rounds / advice; driftLine takes it out", () => {
  const rows = [row("a", 100, [120, 121, 119]), row("b", 200, [210, 209, 211]), row("c", 50, [66])];
  // a ran 1.2× slower in the rounds than in the advice, b 1.05×; c was not calibrated on; z not measured.
  const drift = machineDrift(rows, [
    { schedule: "a", measuredMs: 100 },
    { schedule: "b", measuredMs: 200 },
    { schedule: "z", measuredMs: 10 },
  ]);
  assert.deepEqual(drift.runs.map((r) => [r.schedule, r.adviceMs, r.roundsMs]), [
    ["a", 100, 120],
    ["b", 200, 210],
  ]);
  assert.ok(Math.abs(drift.factor - Math.sqrt(1.2 * 1.05)) < 1e-12, `${drift.factor}`);
  assert.deepEqual(machineDrift(rows, []), { runs: [], factor: 1 });
  const line = driftLine({
    model: "gpt",
    rows,
    pick: "a",
    adviseSeconds: 1,
    spread: 0,
    calibration: "",
    drift,
  });
  // c: 66 / (50 · 1.1225) − 1 = +17.6%, over 10%; a +6.9%, b −6.5%.
  assert.match(line, /a 100 → 120 ms \(\+20\.0%\), b 200 → 210 ms \(\+5\.0%\), ×1\.122/);
  assert.match(line, /a \+6\.9%, b -6\.5%, c \+17\.6% \(within 10%: 2 of 3/);
});
