import assert from "node:assert/strict";
import { SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import { createOptimizer } from "../../../src/nn/optimizer_spec.ts";
import {
  loadTrainingCheckpoint,
  parseTrainingCheckpoint,
  saveTrainingCheckpoint,
} from "../../../src/nn/training_checkpoint.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import type {
  PipelineParallelModel,
  PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpuModel, GPT, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";

const M = 4; // micro-batches
const N = 2, K = 2; // steps before and after the checkpoint
const batches = tokenBatches(N + K, 8, 11);
const SPEC: OptimizerSpec = {
  kind: "adamw",
  lr: 1e-2,
  weightDecay: 0.01,
  lrSchedule: { kind: "warmup-cosine", warmupSteps: 1, decaySteps: 3, minLr: 1e-3 },
};

function build(
  options: Partial<PipelineParallelModelOptions>,
  seed = GPT.seed,
): Promise<PipelineParallelModel> {
  return cpuModel(
    { schedule: "1f1b", microBatches: M, optimizer: SPEC, ...options },
    () => gpt({ ...GPT, seed }),
  );
}

/** N + K steps in one call: the checkpoint bytes, losses and lrs. */
async function uninterrupted(options: Partial<PipelineParallelModelOptions>) {
  await using m = await build(options);
  const r = await m.train(batches);
  return {
    bytes: await m.checkpointBytes({ data: { at: "end" } }),
    losses: r.steps.map((s) => s.loss),
    lrs: r.steps.map((s) => s.lr),
  };
}

/** N steps, a checkpoint; its bytes. */
async function firstPart(options: Partial<PipelineParallelModelOptions>): Promise<Uint8Array> {
  await using m = await build(options);
  await m.train(batches.slice(0, N));
  return await m.checkpointBytes({ data: { at: "middle" } });
}

for (const name of SCHEDULE_NAMES) {
  const workers = name === "zb-v";
  Deno.test(`resume (${name}, P = 2${workers ? ", workers" : ""}): N steps, checkpoint, a new model resumes, K more steps: bit for bit the N + K uninterrupted steps`, async () => {
    const opts = {
      schedule: name,
      rankGroup: workers ? "workers" as const : "in-process" as const,
    };
    const want = await uninterrupted(opts);
    const mid = await firstPart(opts);
    // Other initial weights: everything must come from the file.
    await using m = await build({ ...opts, resume: mid }, 99);
    assert.equal(m.stepCount, N);
    assert.deepEqual(m.resumedFrom?.data, { at: "middle" });
    const r = await m.train(batches.slice(N));
    assert.deepEqual(r.steps.map((s) => s.step), [N, N + 1], "step numbers continue");
    assert.deepEqual(r.steps.map((s) => s.loss), want.losses.slice(N), "losses, exactly");
    assert.deepEqual(r.steps.map((s) => s.lr), want.lrs.slice(N), "the lr schedule continues");
    const got = await m.checkpointBytes({ data: { at: "end" } });
    assert.deepEqual(got, want.bytes, "weights, every optimizer tensor, step: the same bytes");
    if (workers) {
      await m.dispose();
      assert.equal(liveWorkers(), 0, "every worker ended");
    }
  });
}

Deno.test("a P = 2 checkpoint loads into P = 1, P = 4 and another schedule (the same bytes back) and continues as the uninterrupted run", async () => {
  const want = await uninterrupted({});
  const mid = await firstPart({});
  const wantTensors = tensorsOf(
    await (async () => {
      // The weights of the uninterrupted run, as a plain weights file.
      await using m = await build({ resume: want.bytes });
      return await m.saveSafetensors();
    })(),
  );
  for (
    const other of [{ ranks: 1 }, { ranks: 4, schedule: "zb-h1" as const }, {
      schedule: "interleaved-1f1b" as const,
    }]
  ) {
    await using m = await build(other, 5);
    const info = await m.loadCheckpoint(mid);
    assert.equal(info.step, N);
    assert.deepEqual(info.data, { at: "middle" });
    assert.deepEqual(
      await m.checkpointBytes({ data: { at: "middle" } }),
      mid,
      `${JSON.stringify(other)}: round trip`,
    );
    const r = await m.train(batches.slice(N));
    assert.ok(maxRelative(r.steps.map((s) => s.loss), want.losses.slice(N)) <= 1e-6);
    assert.deepEqual(r.steps.map((s) => s.lr), want.lrs.slice(N));
    // AdamW turns summation-order rounding on zero-gradient entries into ±lr
    // steps (see pipeline_parallel_model_test): compared by relative L2.
    const err = paramError(tensorsOf(await m.saveSafetensors()), wantTensors);
    assert.ok(err.l2 <= 1e-5, `${JSON.stringify(other)}: weights off by ${err.l2} (L2)`);
  }
});

Deno.test("a pipeline checkpoint loads into the single-device model (loadTrainingCheckpoint): the same bytes back, and training continues alike", async () => {
  const want = await uninterrupted({});
  const mid = await firstPart({});
  const net = gpt({ ...GPT, seed: 42 });
  const opt = createOptimizer(SPEC, net.parameters());
  const info = loadTrainingCheckpoint(net, opt, mid);
  assert.equal(info.step, N);
  assert.deepEqual(await saveTrainingCheckpoint(net, opt, { data: info.data }), mid);
  const rest = await referenceTraining(net, opt, batches.slice(N));
  assert.ok(maxRelative(rest.losses, want.losses.slice(N)) <= 1e-6);
  const wantWeights = new Map(
    [...parseTrainingCheckpoint(want.bytes).weights].map(([k, e]) => [k, e.data]),
  );
  const err = paramError(rest.tensors, wantWeights);
  assert.ok(err.l2 <= 1e-5, `weights off by ${err.l2}`);
  // And back: the single-device checkpoint resumes a pipeline.
  const single = await saveTrainingCheckpoint(net, opt);
  await using m = await build({ resume: single });
  assert.equal(m.stepCount, N + K);
  assert.deepEqual(await m.checkpointBytes(), single);
  opt.dispose();
  net.dispose();
});

Deno.test("bad or mismatched checkpoint files: a clear error, the model unchanged; create({ resume }) refuses before any worker starts", async () => {
  const mid = await firstPart({});
  const small = await (async () => {
    const net = gpt({ ...GPT, dim: 4 });
    const opt = createOptimizer(SPEC, net.parameters());
    const bytes = await saveTrainingCheckpoint(net, opt);
    opt.dispose();
    net.dispose();
    return bytes;
  })();
  const sgd = await (async () => {
    await using m = await build({ optimizer: { kind: "sgd", lr: 0.1, momentum: 0.9 } });
    await m.train(batches.slice(0, 1));
    return await m.checkpointBytes();
  })();
  await using m = await build({});
  await m.train(batches.slice(0, 1));
  const before = await m.checkpointBytes();
  const dir = await Deno.makeTempDir();
  const cases: [string, string | Uint8Array, RegExp][] = [
    [
      "weights only",
      await m.saveSafetensors(),
      /^checkpoint: __metadata__\.format must be "conveyor-training-checkpoint", got none/,
    ],
    [
      "another model",
      small,
      /^checkpoint: tensor model\.\S+ has shape \[\d+(, \d+)*\], the model needs/,
    ],
    ["another optimizer", sgd, /^checkpoint: its optimizer is sgd, the model's is adamw/],
    ["garbage", new Uint8Array([1, 2, 3]), /^checkpoint: not a valid safetensors file/],
    [
      "truncated",
      mid.slice(0, mid.length - 8),
      /^checkpoint: not a valid safetensors file: .*truncated/,
    ],
    [
      "missing file",
      `${dir}/nothing.safetensors`,
      /^loadCheckpoint: cannot read .*nothing\.safetensors/,
    ],
  ];
  for (const [label, source, re] of cases) {
    await assert.rejects(() => m.loadCheckpoint(source), (e: Error) => {
      assert.match(e.message, re, label);
      return true;
    });
    assert.deepEqual(await m.checkpointBytes(), before, `${label}: the model is unchanged`);
    assert.equal(m.stepCount, 1);
  }
  await assert.rejects(
    () => build({ rankGroup: "workers", resume: small }),
    /^RangeError: checkpoint: tensor model\./,
  );
  assert.equal(liveWorkers(), 0, "no worker started");
  // A good file still loads afterwards.
  await m.loadCheckpoint(mid);
  assert.equal(m.stepCount, N);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("saveCheckpoint / loadCheckpoint through a file; setLearningRate is kept by the checkpoint and reported in every StepResult", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/run.ckpt.safetensors`;
  try {
    const lrs: number[] = [];
    {
      await using m = await build({});
      await m.setLearningRate(0.004);
      const r = await m.train(batches.slice(0, N));
      lrs.push(...r.steps.map((s) => s.lr));
      await m.saveCheckpoint(path, { data: { epoch: "1" } });
      await assert.rejects(
        () => m.setLearningRate(-1),
        /setLearningRate: lr must be a finite number ≥ 0, got -1/,
      );
    }
    assert.deepEqual(lrs, [0.004, 0.004]);
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((e) => e.name),
      ["run.ckpt.safetensors"],
      "no temporary file left",
    );
    await using m = await build({}, 77);
    const info = await m.loadCheckpoint(path);
    assert.deepEqual(info.data, { epoch: "1" });
    const r = await m.train(batches.slice(N));
    assert.deepEqual(
      r.steps.map((s) => s.lr),
      [0.004, 0.004],
      "the hand-set lr survives the checkpoint",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
