import assert from "node:assert/strict";
import { GELU } from "../../../src/nn/gelu.ts";
import { LayerNorm } from "../../../src/nn/layer_norm.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { saveSafetensors } from "../../../src/nn/safetensors.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Tanh } from "../../../src/nn/tanh.ts";
import { TokenPositionEmbedding } from "../../../src/nn/token_position_embedding.ts";
import { Rng } from "../../../src/tensor/random.ts";
import type { Action } from "../../../src/pipeline/schedule/action.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import type { Schedule } from "../../../src/pipeline/schedule/schedule.ts";
import { ScheduleDeadlockError } from "../../../src/pipeline/analysis/validate.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import { PipelineRankError } from "../../../src/pipeline/runtime/pipeline_rank_error.ts";
import { withFaultInjection } from "../../../src/pipeline/runtime/fault_injection.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import type {
  PipelineParallelModel,
  PipelineParallelModelOptions,
  TrainingBatch,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpu, cpuModel, GPT, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";
import { ResidualMLP } from "./_custom_layer.ts";
import { deadlocked2x2, deferredW } from "../_hand_schedules.ts";
import { NoSpec } from "../../nn/_no_spec_layer.ts";

// Tolerances. With SGD (momentum, weight decay) every tensor of the pipeline
// equals single-device training within 1e-5 relative to its largest entry
// (measured ≤ 1e-6): micro-batch gradients are summed in another order, the
// rest is the same arithmetic. AdamW is compared by the relative L2 distance
// of all parameters (≤ 5e-5, measured 2.1e-5 with the CPU backend's f32 sums,
// 3e-6 when it summed in f64): parameters whose exact gradient
// is zero (the attention's key bias: softmax ignores a shift of all scores)
// get rounding noise as gradient, which AdamW normalises into steps of ±lr,
// so those few entries differ elementwise whatever the summation order.
const STRICT = 1e-5;
const ADAMW_L2 = 5e-5;
const LOSS_TOL = 1e-6;
const M = 8; // micro-batches
const ROWS = 10; // rows per batch: micro-batches of 2, 2, 1, 1, 1, 1, 1, 1 rows
const SGD_SPEC: OptimizerSpec = { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 };
const ADAMW_SPEC: OptimizerSpec = { kind: "adamw", lr: 1e-2, weightDecay: 0.01 };

const batches = tokenBatches(3, ROWS);
const refSgd = await referenceTraining(gpt(), SGD_SPEC, batches);
const refAdamW = await referenceTraining(gpt(), ADAMW_SPEC, batches);

type Options = Partial<PipelineParallelModelOptions>;

function build(options: Options): Promise<PipelineParallelModel> {
  return cpuModel({ schedule: "1f1b", microBatches: M, optimizer: SGD_SPEC, ...options });
}

/** Builds, runs `body`, disposes, and checks that every worker ended. */
async function withModel<T>(
  options: Options,
  body: (m: PipelineParallelModel) => Promise<T>,
): Promise<T> {
  const m = await build(options);
  try {
    return await body(m);
  } finally {
    await m.dispose();
    assert.equal(liveWorkers(), 0, "every worker ended");
  }
}

async function expectSame(m: PipelineParallelModel, label: string) {
  const r = await m.train(batches);
  const err = paramError(tensorsOf(await m.saveSafetensors()), refSgd.tensors);
  assert.ok(err.worst <= STRICT, `${label}: ${err.worstName} off by ${err.worst} relative`);
  const lossErr = maxRelative(r.steps.map((s) => s.loss), refSgd.losses);
  assert.ok(lossErr <= LOSS_TOL, `${label}: losses off by ${lossErr}`);
  for (const info of await m.rankInfo()) {
    assert.deepEqual(info.heldKeys, [], `${label}: rank ${info.rank} holds no state after a step`);
  }
  return r;
}

// The generator's documented refusals are interleaved-1f1b's "microBatches
// must be a multiple of max(1, floor(m / p))" and dualpipe-v's "microBatches
// >= 2 × ranks"; with M = 8 and P ∈ {1, 2, 4} neither applies (8 is a
// multiple of 8, 4 and 2; 8 >= 2 · 4), so every schedule must run at every P.
// Any error building a schedule fails the test.
function scheduleFor(name: string, ranks: number): Schedule {
  return generateSchedule(name, { ranks, microBatches: M });
}

Deno.test("M = 8 meets every documented schedule constraint at P = 1, 2, 4", () => {
  assert.ok(M >= 2 * 4, "dualpipe-v: microBatches >= 2 × ranks");
  for (const p of [1, 2, 4]) {
    assert.equal(M % Math.max(1, Math.floor(M / p)), 0, `interleaved-1f1b rounds at P = ${p}`);
  }
  // The rules above are the ones the generator enforces: one step past them is refused.
  assert.throws(
    () => generateSchedule("dualpipe-v", { ranks: 5, microBatches: M }),
    /dualpipe-v needs microBatches >= 2 × ranks \(10\), got microBatches 8 with ranks 5/,
  );
  assert.throws(
    () => generateSchedule("interleaved-1f1b", { ranks: 2, microBatches: M + 1 }),
    /microBatches must be a multiple of 4, got microBatches 9 with ranks 2/,
  );
});

for (const p of [1, 2, 4]) {
  Deno.test(`in-process, P = ${p}: every schedule's 3 steps equal single-device SGD (rel 1e-5)`, async () => {
    const ran: string[] = [];
    for (const name of SCHEDULE_NAMES) {
      const schedule = scheduleFor(name, p);
      await withModel({ schedule, ranks: undefined, microBatches: undefined }, async (m) => {
        const r = await expectSame(m, `${name} P=${p}`);
        assert.equal(r.steps.length, 3);
        const actions = schedule.actions.reduce((a, l) => a + l.length, 0);
        assert.equal(r.events.length, 3 * actions, "every action of every step ran once");
        for (const s of r.steps) {
          assert.ok(s.bubble >= 0 && s.bubble < 1 && s.makespanMs > 0);
          assert.equal(s.busyMs.length, p);
          assert.equal(s.peakActivationBytes.length, p);
          assert.ok(s.peakActivationBytes.every((b) => b > 0), "every rank holds activations");
        }
      });
      ran.push(name);
    }
    assert.deepEqual(ran, [...SCHEDULE_NAMES], `P = ${p}: every schedule ran`);
  });
}

Deno.test("in-process, P = 4: AdamW's parameters equal single-device AdamW (L2 rel 5e-5) for every schedule", async () => {
  const ran: string[] = [];
  for (const name of SCHEDULE_NAMES) {
    const schedule = scheduleFor(name, 4);
    const shape = { schedule, ranks: undefined, microBatches: undefined };
    await withModel({ ...shape, optimizer: ADAMW_SPEC }, async (m) => {
      const r = await m.train(batches);
      const err = paramError(tensorsOf(await m.saveSafetensors()), refAdamW.tensors);
      assert.ok(err.l2 <= ADAMW_L2, `${name}: relative L2 ${err.l2}`);
      const lossErr = maxRelative(r.steps.map((s) => s.loss), refAdamW.losses);
      assert.ok(lossErr <= LOSS_TOL, `${name}: losses off by ${lossErr}`);
    });
    ran.push(name);
  }
  assert.deepEqual(ran, [...SCHEDULE_NAMES], "every schedule ran");
});

// Every schedule in workers at least once, alternating P = 4 and P = 2.
SCHEDULE_NAMES.forEach((name, i) => {
  const p = i % 2 === 0 ? 4 : 2;
  Deno.test(`workers, ${name} at P = ${p}: 3 steps equal single-device SGD; every worker ends`, async () => {
    await withModel({ schedule: name, ranks: p, rankGroup: "workers" }, async (m) => {
      assert.equal(liveWorkers(), p, "one worker per rank");
      await expectSame(m, `${name} P=${p} workers`);
    });
  });
});

Deno.test("workers: steps back to back (train) equal the same steps one by one, bitwise", async () => {
  const a = await withModel(
    { schedule: "zb-h2", ranks: 2, rankGroup: "workers" },
    async (m) => {
      const r = await m.train(batches);
      assert.ok(r.steadyStateBubble !== undefined && r.steadyStateBubble >= 0);
      assert.deepEqual([...new Set(r.events.map((e) => e.iteration))], [0, 1, 2]);
      return { bytes: await m.saveSafetensors(), losses: r.steps.map((s) => s.loss) };
    },
  );
  const b = await withModel({ schedule: "zb-h2", ranks: 2 }, async (m) => {
    const losses: number[] = [];
    for (const batch of batches) losses.push((await m.step(batch)).loss);
    return { bytes: await m.saveSafetensors(), losses };
  });
  assert.deepEqual(a.losses, b.losses);
  assert.deepEqual(a.bytes, b.bytes);
});

Deno.test("explicit unequal micro-batch sizes equal single-device training; bad sizes are refused first", async () => {
  await withModel({ schedule: "interleaved-1f1b", ranks: 2, microBatches: 4 }, async (m) => {
    const sizes = [[5, 1, 3, 1], [1, 1, 1, 7], [2, 3, 4, 1]];
    await assert.rejects(
      m.step({ ...batches[0], microBatchSizes: [5, 1, 3, 2] }),
      /microBatchSizes must be 4 positive integers summing to the 10 rows, got \[5, 1, 3, 2\]/,
    );
    await assert.rejects(m.step({ ...batches[0], microBatchSizes: [10, 0, 0, 0] }), RangeError);
    const losses: number[] = [];
    for (let i = 0; i < 3; i++) {
      losses.push((await m.step({ ...batches[i], microBatchSizes: sizes[i] })).loss);
    }
    const err = paramError(tensorsOf(await m.saveSafetensors()), refSgd.tensors);
    assert.ok(err.worst <= STRICT, `${err.worstName}: ${err.worst}`);
    assert.ok(maxRelative(losses, refSgd.losses) <= LOSS_TOL);
  });
});

Deno.test("a batch smaller than the micro-batch count is a RangeError naming both; the model stays usable", async () => {
  await withModel({ schedule: "gpipe", ranks: 2 }, async (m) => {
    const small = tokenBatches(1, 3, 11)[0];
    await assert.rejects(
      m.step(small),
      (e: Error) =>
        e instanceof RangeError && /3 rows/.test(e.message) && /8 micro-batches/.test(e.message),
    );
    await assert.rejects(m.train([batches[0], small]), /batches\[1\] has 3 rows/);
    assert.equal(m.closed, false);
    await expectSame(m, "after the refused batches");
  });
});

Deno.test("bad batches are refused before any work: lengths, targets out of range, shapes", async () => {
  await withModel({}, async (m) => {
    const b = batches[0];
    await assert.rejects(
      m.step({ ...b, inputs: b.inputs.subarray(1) }),
      /inputs must be a Float32Array of 60 values/,
    );
    await assert.rejects(
      m.step({ ...b, targets: b.targets.subarray(1) }),
      /targets must be a Float32Array of 60 values/,
    );
    const bad = b.targets.slice();
    bad[7] = GPT.vocabSize;
    await assert.rejects(
      m.step({ ...b, targets: bad }),
      /targets\[7\] must be a class id in \[0, \d+\), got \d+/,
    );
    await assert.rejects(m.step({ ...b, shape: [10, 7] }), RangeError);
    // An empty array runs zero steps, as an empty generator does.
    assert.deepEqual((await m.train([])).steps, []);
    // Non-finite inputs or targets are refused, naming the field and the first bad index.
    const nanInputs = b.inputs.slice();
    nanInputs[13] = NaN;
    await assert.rejects(
      m.step({ ...b, inputs: nanInputs }),
      /batch\.inputs\[13\] is NaN: the values must be finite/,
    );
    // A wrong type of a million values is named by type and length, not printed.
    const huge = new Float64Array(1_000_000);
    const e = await m.step({ ...b, inputs: huge as unknown as Float32Array }).then(
      () => new Error("accepted"),
      (x) => x as Error,
    );
    assert.ok(
      e instanceof RangeError && e.message.length < 300,
      `message of ${e.message.length} chars`,
    );
    assert.match(e.message, /got a Float64Array of 1000000$/);
    await expectSame(m, "after the refused batches");
  });
});

Deno.test("activation checkpointing gives the same parameters bitwise (GPipe and ZB-H1) with less memory on GPipe", async () => {
  for (const schedule of ["gpipe", "zb-h1"] as const) {
    const plain = await withModel({ schedule }, async (m) => {
      const r = await m.train(batches);
      return { bytes: await m.saveSafetensors(), r };
    });
    const ckpt = await withModel(
      { schedule, checkpoint: { enabled: true, everyNLayers: 2 } },
      async (m) => {
        const r = await expectSame(m, `${schedule} with checkpointing`);
        return { bytes: await m.saveSafetensors(), r };
      },
    );
    assert.deepEqual(ckpt.bytes, plain.bytes, `${schedule}: identical parameters`);
    assert.deepEqual(ckpt.r.steps.map((s) => s.loss), plain.r.steps.map((s) => s.loss));
    if (schedule === "gpipe") {
      const a = plain.r.steps[0].peakActivationBytes, b = ckpt.r.steps[0].peakActivationBytes;
      assert.ok(b[0] < a[0], `rank 0 peak ${b[0]} with checkpointing, ${a[0]} without`);
    }
  }
  // Checkpointing in workers too.
  await withModel(
    {
      schedule: "zb-v",
      ranks: 2,
      rankGroup: "workers",
      checkpoint: { enabled: true, everyNLayers: 1 },
    },
    (m) => expectSame(m, "zb-v workers with checkpointing"),
  );
});

Deno.test("a maxActivationsInMemory cap below the schedule's in-flight peak is refused before any worker starts", async () => {
  const given = (schedule: Schedule): Options => ({
    schedule,
    ranks: undefined,
    microBatches: undefined,
  });
  // Expected peaks from each schedule's definition: 1F1B's stage s runs
  // min(m, p − s) forwards before its first backward; GPipe and Looped BFS
  // run every forward of a stage before any of its backwards.
  const cases: [string, Options, number, RegExp][] = [
    [
      "1f1b",
      { schedule: "1f1b", ranks: 2, microBatches: 4 },
      1,
      /^RangeError: checkpoint\.maxActivationsInMemory = 1 is below the 2 micro-batches stage 0 holds at once under 1f1b \(p = 2, m = 4\)/,
    ],
    [
      "gpipe",
      { schedule: "gpipe", ranks: 2, microBatches: M },
      M - 1,
      /= 7 is below the 8 micro-batches stage 0 holds at once under gpipe \(p = 2, m = 8\)/,
    ],
    [
      "looped-bfs (V = 2)",
      { schedule: "looped-bfs", ranks: 2, microBatches: 4 },
      3,
      /= 3 is below the 4 micro-batches stage 0 holds at once under looped-bfs \(p = 2, V = 2, m = 4\)/,
    ],
    [
      "I/W split: held until W",
      given(deferredW()),
      1,
      /= 1 is below the 2 micro-batches stage 1 holds at once under deferred-w \(p = 2, m = 2\)/,
    ],
  ];
  const before = liveWorkers();
  for (const [what, options, cap, expected] of cases) {
    for (
      const checkpoint of [{ enabled: true, maxActivationsInMemory: cap }, {
        maxActivationsInMemory: cap,
      }]
    ) {
      const built = build({ rankGroup: "workers", ...options, checkpoint });
      built.then((m) => m.dispose(), () => {}); // should it build, end its workers
      await assert.rejects(
        built,
        (e: Error) => e instanceof RangeError && expected.test(String(e)),
        `${what}, enabled ${checkpoint.enabled ?? false}`,
      );
      assert.equal(liveWorkers(), before, `${what}: no worker started`);
    }
  }
});

Deno.test("a maxActivationsInMemory cap equal to the in-flight peak trains like single-device SGD", async () => {
  // 1F1B, P = 2, m = 8: stage 0 holds min(8, 2) = 2, stage 1 holds 1.
  await withModel(
    { schedule: "1f1b", checkpoint: { enabled: true, everyNLayers: 2, maxActivationsInMemory: 2 } },
    (m) => expectSame(m, "1f1b, cap 2"),
  );
  // Counting micro-batches as freed at their I rather than their W would
  // have accepted a cap of 1 here, and the first step would fail at 1F1.
  await withModel(
    {
      schedule: deferredW(),
      ranks: undefined,
      microBatches: undefined,
      checkpoint: { enabled: true, maxActivationsInMemory: 2 },
    },
    (m) => expectSame(m, "deferred W, cap 2"),
  );
  // In workers too.
  await withModel(
    {
      schedule: "1f1b",
      rankGroup: "workers",
      checkpoint: { enabled: true, everyNLayers: 1, maxActivationsInMemory: 2 },
    },
    (m) => expectSame(m, "1f1b workers, cap 2"),
  );
});

Deno.test("global-norm clipping equals single-device clipGradNorm, in-process (V = 2) and in workers", async () => {
  const clip = 0.5;
  const ref = await referenceTraining(gpt(), SGD_SPEC, batches, "cross-entropy", clip);
  assert.ok(ref.gradNorms.every((n) => n > clip), `clipping is active: norms ${ref.gradNorms}`);
  for (const workers of [false, true]) {
    await withModel(
      {
        schedule: workers ? "interleaved-1f1b" : "zb-v",
        ranks: 2,
        clipGradNorm: clip,
        rankGroup: workers ? "workers" : "in-process",
      },
      async (m) => {
        const r = await m.train(batches);
        const norms = r.steps.map((s) => s.gradNorm!);
        assert.ok(maxRelative(norms, ref.gradNorms) <= 1e-6, `norms ${norms} vs ${ref.gradNorms}`);
        const err = paramError(tensorsOf(await m.saveSafetensors()), ref.tensors);
        assert.ok(err.worst <= STRICT, `${err.worstName}: ${err.worst}`);
        assert.ok(maxRelative(r.steps.map((s) => s.loss), ref.losses) <= LOSS_TOL);
      },
    );
  }
});

Deno.test("mean squared error on a 3-D MLP equals single-device training", async () => {
  const make = () => {
    const rng = new Rng(5);
    return new Sequential([
      new Linear(cpu, 6, 16, { rng }),
      new GELU(cpu),
      new Linear(cpu, 16, 16, { rng }),
      new Tanh(cpu),
      new Linear(cpu, 16, 3, { rng }),
    ]);
  };
  const rng = new Rng(9);
  const data: TrainingBatch[] = Array.from({ length: 3 }, () => ({
    inputs: Float32Array.from({ length: 7 * 2 * 6 }, () => rng.normal()),
    shape: [7, 2, 6],
    targets: Float32Array.from({ length: 7 * 2 * 3 }, () => rng.normal()),
  }));
  const ref = await referenceTraining(make(), SGD_SPEC, data, "mse");
  for (const schedule of ["1f1b", "interleaved-1f1b"] as const) {
    const net = make();
    await withModel(
      { model: net, schedule, ranks: 2, microBatches: 4, loss: "mse", inputShape: [1, 2, 6] },
      async (m) => {
        const r = await m.train(data);
        const err = paramError(tensorsOf(await m.saveSafetensors()), ref.tensors);
        assert.ok(err.worst <= STRICT, `${schedule}: ${err.worstName} ${err.worst}`);
        assert.ok(maxRelative(r.steps.map((s) => s.loss), ref.losses) <= LOSS_TOL);
      },
    );
    net.dispose();
  }
});

Deno.test("save → load round trip: files equal the single-device model's byte for byte; predictions equal", async () => {
  const single = gpt();
  const initial = await saveSafetensors(single);
  const trained = refSgd.bytes;
  await withModel({ schedule: "zb-v", ranks: 2, rankGroup: "workers" }, async (m) => {
    assert.deepEqual(await m.saveSafetensors(), initial, "the initial weights, one file");
    await m.loadSafetensors(trained);
    assert.deepEqual(await m.saveSafetensors(), trained, "loaded weights, saved again");
    // Predictions equal the single-device model with the same weights: a
    // batch of at least m rows as a forward-only pipeline run, a smaller one
    // stage after stage.
    const { loadSafetensors } = await import("../../../src/nn/safetensors.ts");
    loadSafetensors(single, trained);
    for (const b of [batches[1], tokenBatches(1, 3, 5)[0]]) {
      const x = cpu.fromData(b.inputs, b.shape);
      const y = single.forward(x, { save: false });
      const got = await m.predict({ inputs: b.inputs, shape: b.shape });
      assert.deepEqual(got.shape, y.shape);
      assert.deepEqual(got.data, await y.toArray(), `${b.shape[0]} rows`);
      x.dispose();
      y.dispose();
    }
    assert.ok(m.lastEvents.every((e) => e.action.kind === "F"), "a forward-only run");
    for (const info of await m.rankInfo()) assert.deepEqual(info.heldKeys, []);
    assert.deepEqual(await m.saveSafetensors(), trained, "predict changes nothing");
    const stats = await m.parameterStats();
    let sum = 0, sumSq = 0;
    for (const p of single.parameters()) {
      for (const v of await p.value.toArray()) {
        sum += v;
        sumSq += v * v;
      }
    }
    assert.deepEqual(stats, { sum, sumSq, count: tensorsCount(single) });

    // Malformed files are refused and change nothing.
    const other = gpt({ ...GPT, dim: 12 });
    const cases: [string, Uint8Array, RegExp][] = [
      ["missing", await saveSafetensors(single.parameters().slice(1)), /has no tensor/],
      ["wrong shape", await saveSafetensors(other), /has shape/],
      [
        "extra",
        await saveSafetensors([...single.parameters(), {
          ...single.parameters()[0],
          name: "extra.weight",
        }]),
        /extra\.weight, which the model lacks/,
      ],
      ["truncated", trained.subarray(0, trained.length - 4), /./],
    ];
    for (const [what, bytes, re] of cases) {
      await assert.rejects(m.loadSafetensors(bytes), re, what);
      assert.deepEqual(await m.saveSafetensors(), trained, `${what}: the model is unchanged`);
    }
    other.dispose();
  });
  single.dispose();
});

function tensorsCount(model: Sequential): number {
  return model.parameters().reduce((a, p) => a + p.value.size, 0);
}

Deno.test("a custom layer registered in a module the workers import trains like on one device", async () => {
  const make = () => {
    const rng = new Rng(2);
    return new Sequential([
      new TokenPositionEmbedding(cpu, GPT.vocabSize, GPT.seqLen, 8, { rng }),
      new ResidualMLP(cpu, 8, 16, 1),
      new ResidualMLP(cpu, 8, 16, 2),
      new LayerNorm(cpu, 8),
      new Linear(cpu, 8, GPT.vocabSize, { rng, initScale: 0.02 }),
    ]);
  };
  const ref = await referenceTraining(make(), SGD_SPEC, batches);
  const net = make();
  const modules = [new URL("./_custom_layer.ts", import.meta.url)];
  await withModel(
    { model: net, schedule: "1f1b", ranks: 2, rankGroup: "workers", modules },
    async (m) => {
      const r = await m.train(batches);
      const err = paramError(tensorsOf(await m.saveSafetensors()), ref.tensors);
      assert.ok(err.worst <= STRICT, `${err.worstName}: ${err.worst}`);
      assert.ok(maxRelative(r.steps.map((s) => s.loss), ref.losses) <= LOSS_TOL);
    },
  );
  // Without the module the workers cannot rebuild the layer: startup fails, naming it.
  await assert.rejects(
    build({ model: net, schedule: "1f1b", ranks: 2, rankGroup: "workers" }),
    /unknown layer kind "TestResidualMLP"/,
  );
  assert.equal(liveWorkers(), 0);
  net.dispose();
});

Deno.test("a worker that throws mid-step rejects within 10 s naming rank, stage and action; no worker is left", async () => {
  const m = await build(withFaultInjection({
    schedule: "1f1b",
    ranks: 4,
    rankGroup: "workers",
  }, { failAt: "2F5", iteration: 1 }));
  const t = performance.now();
  const error = await m.train(batches).then(() => null, (e) => e);
  const ms = performance.now() - t;
  assert.ok(error instanceof PipelineRankError, `got ${error}`);
  assert.ok(ms < 10_000, `rejected after ${ms} ms`);
  assert.equal(error.rank, 2);
  assert.deepEqual(error.action, { kind: "F", stage: 2, microBatch: 5 });
  assert.equal(error.iteration, 1);
  assert.match(error.message, /rank 2 failed in 2F5 \(stage 2, microBatch 5, iteration 1\)/);
  assert.match(error.message, /injected failure at 2F5/);
  assert.equal(liveWorkers(), 0, "no worker left running");
  assert.equal(m.closed, true);
  await assert.rejects(m.step(batches[0]), /the model failed and is closed/);
  await m.dispose();
  // A new model can be built and trained afterwards.
  await withModel(
    { schedule: "1f1b", ranks: 4, rankGroup: "workers" },
    (n) => expectSame(n, "rebuilt"),
  );
});

Deno.test("in-process: a failing rank rejects the step naming it, and the model closes", async () => {
  const m = await build(withFaultInjection({ schedule: "zb-h1", ranks: 2 }, { failAt: "1W3" }));
  const error = await m.step(batches[0]).then(() => null, (e) => e);
  assert.ok(error instanceof PipelineRankError, `got ${error}`);
  assert.match(error.message, /rank 1 failed in 1W3 \(stage 1, microBatch 3, iteration 0\)/);
  assert.equal(m.closed, true);
  await m.dispose();
});

Deno.test("a worker that hangs is caught by the heartbeat timeout within 10 s; no worker is left", async () => {
  const m = await build(withFaultInjection({
    schedule: "1f1b",
    ranks: 2,
    rankGroup: "workers",
    heartbeatMs: 1000,
  }, { hangAt: "1B3" }));
  const t = performance.now();
  const error = await m.step(batches[0]).then(() => null, (e) => e);
  const ms = performance.now() - t;
  assert.ok(error instanceof PipelineRankError, `got ${error}`);
  assert.ok(ms < 10_000, `rejected after ${ms} ms`);
  assert.equal(error.kind, "hang");
  assert.equal(error.rank, 1);
  assert.match(error.message, /rank 1 hung in 1B3/);
  assert.equal(liveWorkers(), 0);
  await m.dispose();
});

Deno.test("every option is checked before any worker starts", async () => {
  const base = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
  const withAction = (rank: number, index: number, a: Action): Schedule => ({
    ...base,
    actions: base.actions.map((l, r) => r === rank ? l.map((x, i) => i === index ? a : x) : l),
  });
  const deadlock = deadlocked2x2();
  const small = gpt({ ...GPT, layers: 1 }); // 4 layers
  const noSpec = new Sequential([new Linear(cpu, 2, 2), new NoSpec(cpu)], { names: ["a", "b"] });
  const cases: [string, Options, RegExp | (new (...a: never[]) => Error)][] = [
    [
      "optimizer kind",
      { optimizer: { kind: "adam" } as unknown as OptimizerSpec },
      /optimizer\.kind must be "adamw" or "sgd", got "adam"/,
    ],
    [
      "optimizer lr",
      { optimizer: { kind: "sgd", lr: -1 } },
      /lr of group 0 must be a finite number ≥ 0, got -1/,
    ],
    [
      "optimizer key",
      { optimizer: { kind: "sgd", betas: 1 } as unknown as OptimizerSpec },
      /unknown sgd option "betas"/,
    ],
    ["loss", { loss: "hinge" as "mse" }, /loss must be "cross-entropy" or "mse", got "hinge"/],
    [
      "backend",
      { backend: "tpu" as "cpu" },
      /backend must be "auto", "cpu" or "webgpu", got "tpu"/,
    ],
    [
      "checkpoint",
      { checkpoint: { enabled: true, everyNLayers: 0 } },
      /everyNLayers must be an integer >= 1, got 0/,
    ],
    ["clip", { clipGradNorm: 0 }, /clipGradNorm must be a finite positive number, got 0/],
    [
      "hang in-process",
      withFaultInjection({ rankGroup: "in-process" }, { hangAt: "0F0" }),
      /faultInjection "hang" holds or ends the rank's thread: it needs ranks in workers/,
    ],
    [
      "fault place",
      withFaultInjection({}, { failAt: "zzz" }),
      /faultInjection\.failAt must name an action .* got "zzz"/,
    ],
    [
      "fault option",
      withFaultInjection({}, { failAt: "0F0", when: 1 } as never),
      /faultInjection\.when is not an option/,
    ],
    // Checked in every mode, as the user wrote them.
    [
      "heartbeat in-process",
      { heartbeatMs: NaN, rankGroup: "in-process" },
      /heartbeatMs must be a finite number of ms > 0, got NaN/,
    ],
    [
      "stall in-process",
      { stallTimeoutMs: -1, rankGroup: "in-process" },
      /stallTimeoutMs must be a finite number of ms > 0, got -1/,
    ],
    [
      "rank group",
      { rankGroup: "threads" as "workers" },
      /rankGroup must be one of workers, subprocess, in-process, mpi, got "threads"/,
    ],
    [
      "custom partition",
      { partition: { name: "mine", partition: () => ({ boundaries: [0, 4, 2] }) } as never },
      /partition \[0, 4, 2\] from the "mine" strategy: .*\(\d+ layers into 2 stages\)$/,
    ],
    ["schedule name", { schedule: "2f2b" as "1f1b" }, /unknown schedule "2f2b"/],
    ["micro-batches", { microBatches: 0 }, /microBatches must be a positive integer, got 0/],
    [
      "ranks mismatch",
      { schedule: base, ranks: 3 },
      /ranks is 3 but the given schedule has ranks 2/,
    ],
    ["micro-batch out of range", {
      schedule: withAction(0, 0, { kind: "F", stage: 0, microBatch: 9 }),
      ranks: undefined,
      microBatches: undefined,
    }, /microBatch must be an integer in 0\.\.3, got 9/],
    ["stage on another rank", {
      schedule: withAction(0, 0, { kind: "F", stage: 1, microBatch: 0 }),
      ranks: undefined,
      microBatches: undefined,
    }, /1F0 is on rank 0, but stage 1 is held by rank 1/],
    [
      "deadlock",
      { schedule: deadlock, ranks: undefined, microBatches: undefined },
      ScheduleDeadlockError,
    ],
    [
      "too few layers",
      { model: small, schedule: "zb-v", ranks: 4 },
      /the model has 4 layers, fewer than the 8 stages of zb-v on 4 ranks \(2 stages per rank\): every stage needs at least one layer; use fewer ranks or a schedule of one stage per rank/,
    ],
    [
      "no spec",
      { model: noSpec, loss: "mse", inputShape: [1, 2] },
      /layer b: NoSpec: this layer has no spec\(\)/,
    ],
    [
      "not a Sequential",
      { model: new Linear(cpu, 2, 2) as unknown as Sequential },
      /model must be a Sequential/,
    ],
  ];
  for (const [what, options, expected] of cases) {
    const built = build({ rankGroup: "workers", ...options });
    built.then((m) => m.dispose(), () => {}); // should it build, end its workers
    await assert.rejects(built, expected as RegExp, what);
    assert.equal(liveWorkers(), 0, `${what}: no worker started`);
  }
  small.dispose();
  noSpec.dispose();
});

Deno.test("writeTrace writes the last step as a Chrome trace or an SVG; busy and disposed models refuse calls", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await withModel({ schedule: "zb-h1", ranks: 2 }, async (m) => {
      await assert.rejects(m.writeTrace(`${dir}/none.json`), /no step has run yet/);
      const pending = m.step(batches[0]);
      await assert.rejects(m.step(batches[1]), /busy/);
      const r = await pending;
      await m.writeTrace(`${dir}/t.json`);
      await m.writeTrace(`${dir}/t.svg`);
      const trace = JSON.parse(await Deno.readTextFile(`${dir}/t.json`));
      const boxes = trace.traceEvents.filter((e: { ph: string }) => e.ph === "X");
      assert.equal(boxes.length, r.events.length);
      const svg = await Deno.readTextFile(`${dir}/t.svg`);
      assert.match(svg, /^<svg/);
      assert.match(svg, /zb-h1/);
      await m.dispose();
      await m.dispose(); // idempotent
      await assert.rejects(m.step(batches[0]), /disposed/);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const hasGpu = Deno.env.get("CONVEYOR_TEST_BACKENDS") !== "cpu" &&
  (await navigator.gpu?.requestAdapter().catch(() => null)) != null;

if (hasGpu) {
  Deno.test("WebGPU in workers (zb-h1, P = 2) equals single-device CPU training (tensors rel 1e-5, losses 1e-5)", async () => {
    await withModel(
      { schedule: "zb-h1", ranks: 2, rankGroup: "workers", backend: "webgpu" },
      async (m) => {
        assert.deepEqual((await m.rankInfo()).map((i) => i.backend), ["webgpu", "webgpu"]);
        const r = await m.train(batches);
        const err = paramError(tensorsOf(await m.saveSafetensors()), refSgd.tensors);
        assert.ok(err.worst <= 1e-5, `${err.worstName}: ${err.worst}`);
        assert.ok(maxRelative(r.steps.map((s) => s.loss), refSgd.losses) <= 1e-5);
      },
    );
  });
}
