import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { ReLU } from "../../../src/nn/relu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { adviseSchedule } from "../../../src/pipeline/model/advise.ts";
import { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { FixedPartition } from "../../../src/pipeline/partition/partition.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { planCandidate, predictStep } from "../../../src/pipeline/advise/step_prediction.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";

const W = 32;
function mlp(be: CpuBackend): Sequential {
  return new Sequential([
    new Linear(be, 8, W, { seed: 1 }),
    new ReLU(be),
    new Linear(be, W, W, { seed: 2 }),
    new ReLU(be),
    new Linear(be, W, W, { seed: 3 }),
    new ReLU(be),
    new Linear(be, W, 1, { seed: 4 }),
  ]);
}
const ROWS = 16;
const sample = {
  inputs: new Float32Array(ROWS * 8).map((_, i) => Math.sin(i)),
  shape: [ROWS, 8],
  targets: new Float32Array(ROWS).map((_, i) => Math.cos(i)),
};
// Profile-only predictions (no real calibration runs) unless a test asks.
const QUICK = { repeats: 1, warmup: 0, calibrate: false } as const;
const PARAMS = [8 * W + W, 0, W * W + W, 0, W * W + W, 0, W + 1];

Deno.test("adviseSchedule: predicted activation bytes per rank match what the ranks report (first step)", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const advice = await adviseSchedule(net, sample, {
      loss: "mse",
      ranks: 2,
      microBatches: 4,
      optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
      ...QUICK,
    });
    // Every schedule of the table, v-half and v-min among them.
    assert.deepEqual(advice.candidates.map((c) => c.schedule).sort(), [...SCHEDULE_NAMES].sort());
    for (const c of advice.candidates) {
      // The same schedule and partition, trained in this thread: its first step's report.
      const pipe = await PipelineParallelModel.create({
        model: net,
        schedule: c.generated!,
        partition: new FixedPartition(c.boundaries),
        optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
        loss: "mse",
        backend: "cpu",
        rankGroup: "in-process",
      });
      try {
        const step = await pipe.step(sample);
        c.memory.forEach((m, r) => {
          const got = step.peakActivationBytes[r];
          assert.ok(
            Math.abs(m.activations - got) <= 0.1 * got,
            `${c.schedule} rank ${r}: predicted ${m.activations}, reported ${got}`,
          );
        });
      } finally {
        await pipe.dispose();
      }
    }
  } finally {
    net.dispose();
  }
});

Deno.test("adviseSchedule: parameter, gradient, optimizer and copy bytes per rank, by hand", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const advice = await adviseSchedule(net, sample, {
      loss: "mse",
      schedules: ["1f1b", "zb-v"],
      ranks: 2,
      microBatches: 4,
      optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
      ...QUICK,
    });
    for (const c of advice.candidates) {
      const s = generateSchedule(c.schedule, { ranks: 2, microBatches: 4 });
      const perRank = [0, 0];
      for (let k = 0; k + 1 < c.boundaries.length; k++) {
        for (let i = c.boundaries[k]; i < c.boundaries[k + 1]; i++) {
          perRank[s.stageToRank[k]] += 4 * PARAMS[i];
        }
      }
      c.memory.forEach((m, r) => {
        assert.equal(m.parameters, perRank[r], `${c.schedule} rank ${r}`);
        assert.equal(m.gradients, perRank[r]);
        assert.equal(m.optimizerState, 2 * perRank[r]); // AdamW: two moments
        assert.equal(m.stepCopies, 3 * perRank[r]); // parameters and both moments
        assert.equal(c.peakBytes[r], m.total);
        assert.equal(m.total, m.activations + 7 * perRank[r]);
      });
    }
    // Without the non-finite check there are no copies.
    const off = await adviseSchedule(net, sample, {
      loss: "mse",
      schedules: ["1f1b"],
      microBatches: 4,
      nonFinite: "off",
      ...QUICK,
    });
    assert.ok(off.candidates[0].memory.every((m) => m.stepCopies === 0));
  } finally {
    net.dispose();
  }
});

Deno.test("adviseSchedule: ranked, fitting first; impossible combinations are skipped with the reason", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const loose = await adviseSchedule(net, sample, {
      loss: "mse",
      schedules: ["gpipe", "1f1b", "zb-h1"],
      ranks: [2, 4],
      microBatches: [4, 8],
      concurrent: false,
      ...QUICK,
    });
    assert.equal(loose.candidates.length, 12);
    const ms = loose.candidates.map((c) => c.predictedMs);
    assert.deepEqual(ms, [...ms].sort((a, b) => a - b));
    assert.ok(loose.profiles.every((p) => p.concurrency === 1));
    assert.deepEqual(
      [...new Set(loose.profiles.map((p) => `${p.ranks}/${p.profile.rows}`))].sort(),
      ["2/2", "2/4", "4/2", "4/4"],
    );
    // A limit between the smallest and largest rank peaks: those within rank first.
    const peaks = loose.candidates.map((c) => Math.max(...c.peakBytes)).sort((a, b) => a - b);
    const limit = peaks[Math.floor(peaks.length / 2)];
    const tight = await adviseSchedule(net, sample, {
      loss: "mse",
      schedules: ["gpipe", "1f1b", "zb-h1"],
      ranks: [2, 4],
      microBatches: [4, 8],
      memoryLimit: limit,
      ...QUICK,
    });
    const fits = tight.candidates.map((c) => c.fits);
    assert.ok(fits.includes(true) && fits.includes(false));
    assert.deepEqual(fits, [...fits].sort((a, b) => Number(b) - Number(a)));
    for (const c of tight.candidates) assert.equal(c.fits, Math.max(...c.peakBytes) <= limit);
    // 7 layers cannot be cut into ZB-V's 8 stages at 4 ranks.
    const v = await adviseSchedule(net, sample, {
      loss: "mse",
      schedules: ["zb-v"],
      ranks: [2, 4],
      microBatches: 8,
      ...QUICK,
    });
    assert.equal(v.candidates.length, 1);
    assert.equal(v.skipped.length, 1);
    assert.match(v.skipped[0].reason, /8 stages, more than the model's 7 layers/);
  } finally {
    net.dispose();
  }
});

Deno.test("adviseSchedule calibrate false: profiles alone and together; each prediction is the contention simulation of both", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const advice = await adviseSchedule(net, sample, {
      loss: "mse",
      schedules: ["gpipe", "1f1b", "zb-h1"],
      ranks: 2,
      microBatches: 4,
      ...QUICK,
    });
    assert.deepEqual(advice.profiles.map((p) => [p.ranks, p.concurrency]), [[2, 1], [2, 2]]);
    const [alone, together] = advice.profiles;
    for (const c of advice.candidates) {
      const plan = planCandidate(
        c.schedule as "gpipe",
        2,
        4,
        alone.profile.layers,
        alone.overheads,
        alone.profile.loss?.median ?? 0,
        { layers: together.profile.layers, lossMs: together.profile.loss?.median ?? 0 },
      );
      assert.deepEqual(c.boundaries, plan.partition.boundaries);
      const step = predictStep(plan.schedule, plan.costs, alone.overheads, {
        together: plan.together,
      });
      assert.equal(c.predictedMs, step.stepMs, c.schedule);
      assert.equal(c.bubble, step.bubble, c.schedule);
      assert.equal(c.uncalibratedMs, undefined);
      assert.equal(c.calibration, undefined);
    }
    assert.deepEqual(advice.calibrations, []);
  } finally {
    net.dispose();
  }
});

Deno.test("adviseSchedule calibrates by default: real 1F1B and ZB-H1 runs scale the profile; every prediction uses the fit", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const o = {
      loss: "mse",
      schedules: ["gpipe", "1f1b", "zb-h1"],
      ranks: 2,
      microBatches: 4,
      repeats: 1,
      warmup: 0,
    } as const;
    const advice = await adviseSchedule(net, sample, { ...o, calibrateSteps: 2 });
    assert.equal(advice.calibrations.length, 1);
    const cal = advice.calibrations[0];
    assert.equal(cal.ranks, 2);
    assert.equal(cal.microBatches, 4);
    assert.deepEqual(cal.runs.map((r) => r.schedule), ["1f1b", "zb-h1"]);
    for (const k of ["F", "I", "W", "B"] as const) {
      const f = cal.kinds[k]!;
      assert.ok(f.factor > 0 && Number.isFinite(f.factor), `${k}: ${f.factor}`);
      assert.ok(f.spread >= 0 && f.byStage.length === 2);
      // F: both runs, 4 micro-batches on 2 stages, 2 steps each; I, W, B: one run.
      assert.equal(f.samples, k === "F" ? 32 : 16, k);
      assert.equal(cal.factors[k], f.factor);
    }
    assert.ok(cal.actionSamples > 0 && cal.handOverSamples > 0);
    // The per-step cost closes the runs' mean gap, or is 0 where the prediction is already longer.
    const gap = cal.runs.reduce((a, r) => a + r.predictedMs - r.measuredMs, 0);
    if (cal.overheads.stepMs! > 0) {
      assert.ok(Math.abs(gap) < 1e-3 * cal.runs[0].measuredMs, `${gap}`);
    } else assert.ok(gap >= 0);
    const [alone, together] = advice.profiles;
    const lossMs = alone.profile.loss?.median ?? 0;
    for (const c of advice.candidates) {
      const name = c.schedule as "gpipe";
      const plan = planCandidate(
        name,
        2,
        4,
        alone.profile.layers,
        cal.overheads,
        lossMs,
        undefined,
        cal.factors,
      );
      assert.deepEqual(c.boundaries, plan.partition.boundaries);
      const step = predictStep(plan.schedule, plan.costs, cal.overheads);
      assert.equal(c.predictedMs, step.stepMs, c.schedule);
      assert.equal(c.bubble, step.bubble, c.schedule);
      assert.deepEqual(c.calibration, { factors: cal.factors, ...cal.overheads });
      // Beside it: the profile-only prediction, as with calibrate false.
      const busy = { layers: together.profile.layers, lossMs: together.profile.loss?.median ?? 0 };
      const p0 = planCandidate(name, 2, 4, alone.profile.layers, alone.overheads, lossMs, busy);
      const u = predictStep(p0.schedule, p0.costs, alone.overheads, { together: p0.together });
      assert.equal(c.uncalibratedMs, u.stepMs, c.schedule);
    }
    // Only full-backward schedules: one 1F1B run; I and W take the B factor.
    const b = await adviseSchedule(net, sample, { ...o, schedules: ["gpipe"], calibrateSteps: 2 });
    const only = b.calibrations[0];
    assert.deepEqual(only.runs.map((r) => r.schedule), ["1f1b"]);
    assert.equal(only.kinds.I, undefined);
    assert.equal(only.factors.I, only.kinds.B!.factor);
    assert.equal(only.factors.W, only.kinds.B!.factor);
  } finally {
    net.dispose();
  }
});

Deno.test("adviseSchedule verify: the best candidate measured beside its prediction; the model unchanged", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const before = await Promise.all(net.parameters().map((p) => p.value.toArray()));
    const advice = await adviseSchedule(net, sample, {
      loss: "mse",
      schedules: ["1f1b", "zb-h1"],
      microBatches: 4,
      verify: 1,
      verifyWarmup: 1,
      verifySteps: 3,
      ...QUICK,
    });
    const [first, second] = advice.candidates;
    assert.ok(first.measuredMs! > 0 && first.measuredBubble! >= 0);
    assert.equal(second.measuredMs, undefined);
    first.memory.forEach((m, r) => {
      const got = first.measuredActivationBytes![r];
      assert.ok(
        Math.abs(m.activations - got) <= 0.1 * got,
        `rank ${r}: ${m.activations} vs ${got}`,
      );
    });
    const after = await Promise.all(net.parameters().map((p) => p.value.toArray()));
    assert.deepEqual(after, before);
  } finally {
    net.dispose();
  }
});

Deno.test("adviseSchedule: bad options and samples are refused before any worker starts", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  const workers = liveWorkers();
  try {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ loss: "l1" }, /loss must be "cross-entropy" or "mse", got "l1"/],
      [{ loss: "mse", schedules: ["1f1b", "fast"] }, /schedules must be names from .* got "fast"/],
      [{ loss: "mse", ranks: [2, 0] }, /ranks must hold positive integers, got 0/],
      [{ loss: "mse", microBatches: 17 }, /microBatches 17 is more than the sample's 16 rows/],
      [{ loss: "mse", backend: "tpu" }, /backend must be .* got "tpu"/],
      [{ loss: "mse", memoryLimit: 0 }, /memoryLimit must be a number of bytes > 0, got 0/],
      [{ loss: "mse", verify: -1 }, /verify must be an integer >= 0/],
      [{ loss: "mse", verifySteps: 1 }, /verifySteps must be an integer >= 2/],
      [{ loss: "mse", repeats: 0 }, /repeats must be an integer >= 1/],
      [{ loss: "mse", calibrate: "yes" }, /calibrate must be a boolean, got "yes"/],
      [{ loss: "mse", calibrateSteps: 1 }, /calibrateSteps must be an integer >= 2, got 1/],
      [{ loss: "mse", optimizer: { kind: "lion" } }, /optimizer/],
      [
        { loss: "cross-entropy" },
        /sample.targets\[0\] is 1: cross-entropy targets are class ids, integers in \[0, 1\)/,
      ],
    ];
    for (const [o, re] of cases) {
      await assert.rejects(() => adviseSchedule(net, sample, o as never), re);
    }
    await assert.rejects(
      () => adviseSchedule(net, { ...sample, inputs: new Float32Array(3) }, { loss: "mse" }),
      /sample.inputs must be a Float32Array of 128 values/,
    );
    await assert.rejects(
      () =>
        adviseSchedule(net, { ...sample, inputs: new Float32Array(144), shape: [16, 9] }, {
          loss: "mse",
        }),
      /inFeatures = 8/,
    );
    await assert.rejects(() => adviseSchedule({} as never, sample, { loss: "mse" }), /Sequential/);
    assert.equal(liveWorkers(), workers);
  } finally {
    net.dispose();
  }
});
