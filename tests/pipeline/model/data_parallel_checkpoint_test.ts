// Checkpoints of a data-parallel model (`dataParallel: D`): one file in the
// single-device training checkpoint format, loadable into any (D, P) and
// into the single-device model; a resume at the same (D, P) is bit for bit
// the uninterrupted run, and at another (D, P) within the f32 rounding of
// summing gradients in another order.

import assert from "node:assert/strict";
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

const TOL = 1e-6; // across different (D, P): relative to each tensor's largest entry
const M = 2; // micro-batches per replica
const N = 2, K = 2; // steps before and after the checkpoint
const ROWS = 8; // a multiple of every D here, at least D·M rows
const batches = tokenBatches(N + K, ROWS, 13);
// Momentum (optimizer state) and an lr schedule (the step count matters).
const SGD: OptimizerSpec = {
  kind: "sgd",
  lr: 0.1,
  momentum: 0.9,
  lrSchedule: { kind: "step", stepSize: 3, gamma: 0.5 },
};
const ADAMW: OptimizerSpec = {
  kind: "adamw",
  lr: 1e-2,
  weightDecay: 0.01,
  lrSchedule: { kind: "warmup-cosine", warmupSteps: 1, decaySteps: 3, minLr: 1e-3 },
};

type Options = Partial<PipelineParallelModelOptions>;

function build(
  d: number,
  p: number,
  optimizer: OptimizerSpec,
  more: Options = {},
  seed = GPT.seed,
): Promise<PipelineParallelModel> {
  return cpuModel(
    { schedule: "1f1b", microBatches: M, optimizer, ranks: p, dataParallel: d, ...more },
    () => gpt({ ...GPT, seed }),
  );
}

interface Run {
  readonly losses: number[];
  readonly lrs: number[];
  readonly bytes: Uint8Array; // training checkpoint at the end
  readonly weights: Map<string, Float32Array>;
}

/** The N + K steps at (2, 2) in one call, and the checkpoint after N of them. */
async function uninterruptedAt22(optimizer: OptimizerSpec, more: Options = {}) {
  await using m = await build(2, 2, optimizer, more);
  const first = await m.train(batches.slice(0, N));
  const mid = await m.checkpointBytes({ data: { at: "middle" } });
  const rest = await m.train(batches.slice(N));
  const steps = [...first.steps, ...rest.steps];
  const bytes = await m.checkpointBytes({ data: { at: "end" } });
  const run: Run = {
    losses: steps.map((s) => s.loss),
    lrs: steps.map((s) => s.lr),
    bytes,
    weights: tensorsOf(await m.saveSafetensors()),
  };
  return { run, mid };
}

/** N steps at (2, 2), then `saveCheckpoint` to a file; the file's bytes. */
async function savedAt22(optimizer: OptimizerSpec, dir: string): Promise<Uint8Array> {
  const path = `${dir}/dp.ckpt.safetensors`;
  {
    await using m = await build(2, 2, optimizer);
    await m.train(batches.slice(0, N));
    await m.saveCheckpoint(path, { data: { at: "middle" } });
  }
  assert.deepEqual(
    [...Deno.readDirSync(dir)].map((e) => e.name),
    ["dp.ckpt.safetensors"],
    "one file written, no temporary file left",
  );
  return await Deno.readFile(path);
}

function weightsOfCheckpoint(bytes: Uint8Array): Map<string, Float32Array> {
  return new Map([...parseTrainingCheckpoint(bytes).weights].map(([k, e]) => [k, e.data]));
}

Deno.test("a (2, 2) checkpoint is the single-device format: the single-device model loads it and writes the same bytes back; it equals the uninterrupted run's state", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { mid } = await uninterruptedAt22(SGD);
    const file = await savedAt22(SGD, dir);
    assert.deepEqual(file, mid, "saveCheckpoint writes checkpointBytes");
    const ck = parseTrainingCheckpoint(file);
    assert.equal(ck.step, N);
    assert.equal(ck.optimizerStep, N);
    assert.deepEqual(ck.data, { at: "middle" });
    // One copy of each parameter (not one per replica), named as the single-device model's.
    const net = gpt({ ...GPT, seed: 42 });
    const opt = createOptimizer(SGD, net.parameters());
    try {
      assert.deepEqual(
        [...ck.weights.keys()].sort(),
        net.parameters().map((p) => p.name).sort(),
      );
      const info = loadTrainingCheckpoint(net, opt, file);
      assert.equal(info.step, N);
      assert.deepEqual(await saveTrainingCheckpoint(net, opt, { data: info.data }), file);
    } finally {
      opt.dispose();
      net.dispose();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

for (const [label, spec] of [["SGD with momentum", SGD], ["AdamW", ADAMW]] as const) {
  Deno.test(`(2, 2), ${label}: N steps, checkpoint, a new (2, 2) model resumes (create and loadCheckpoint), K more steps: bit for bit the uninterrupted run`, async () => {
    const { run: want, mid } = await uninterruptedAt22(spec);
    for (const how of ["resume", "loadCheckpoint"] as const) {
      // Other initial weights: everything must come from the file.
      await using m = how === "resume"
        ? await build(2, 2, spec, { resume: mid }, 99)
        : await build(2, 2, spec, {}, 99);
      if (how === "loadCheckpoint") await m.loadCheckpoint(mid);
      assert.equal(m.stepCount, N);
      assert.deepEqual(await m.checkpointBytes({ data: { at: "middle" } }), mid, "round trip");
      const r = await m.train(batches.slice(N));
      assert.deepEqual(r.steps.map((s) => s.step), [N, N + 1], `${how}: step numbers continue`);
      assert.deepEqual(r.steps.map((s) => s.loss), want.losses.slice(N), `${how}: losses`);
      assert.deepEqual(r.steps.map((s) => s.lr), want.lrs.slice(N), `${how}: lrs`);
      assert.deepEqual(
        await m.checkpointBytes({ data: { at: "end" } }),
        want.bytes,
        `${how}: weights, every optimizer tensor and the step: the same bytes`,
      );
    }
  });
}

Deno.test(`a (2, 2) checkpoint loads into (1, 1), (1, 2), (2, 1) and the single-device model, and each continues as the uninterrupted (2, 2) run (rel ${TOL})`, async () => {
  const { run: want, mid } = await uninterruptedAt22(SGD);
  const check = (
    where: string,
    losses: number[],
    weights: Map<string, Float32Array>,
  ): void => {
    const lossErr = maxRelative(losses, want.losses.slice(N));
    assert.ok(lossErr <= TOL, `${where}: losses off by ${lossErr}`);
    const err = paramError(weights, want.weights);
    assert.ok(err.worst <= TOL, `${where}: ${err.worstName} off by ${err.worst} relative`);
  };
  for (const [d, p] of [[1, 1], [1, 2], [2, 1]] as const) {
    const where = `(${d}, ${p})`;
    await using m = await build(d, p, SGD, {}, 5);
    const info = await m.loadCheckpoint(mid);
    assert.equal(info.step, N);
    assert.deepEqual(info.data, { at: "middle" });
    assert.deepEqual(
      await m.checkpointBytes({ data: { at: "middle" } }),
      mid,
      `${where}: the same bytes back`,
    );
    const r = await m.train(batches.slice(N));
    assert.deepEqual(r.steps.map((s) => s.step), [N, N + 1]);
    assert.deepEqual(r.steps.map((s) => s.lr), want.lrs.slice(N), `${where}: lrs`);
    check(where, r.steps.map((s) => s.loss), tensorsOf(await m.saveSafetensors()));
  }
  // The single-device model on the whole batches.
  const net = gpt({ ...GPT, seed: 42 });
  const opt = createOptimizer(SGD, net.parameters());
  try {
    assert.equal(loadTrainingCheckpoint(net, opt, mid).step, N);
    const rest = await referenceTraining(net, opt, batches.slice(N));
    check("single device", rest.losses, rest.tensors);
    // And back: the single-device model's checkpoint resumes a (2, 2) model.
    const single = await saveTrainingCheckpoint(net, opt);
    await using m = await build(2, 2, SGD, { resume: single }, 77);
    assert.equal(m.stepCount, N + K);
    assert.deepEqual(await m.checkpointBytes(), single, "(2, 2) takes the single-device state");
  } finally {
    opt.dispose();
    net.dispose();
  }
  // The uninterrupted run's own end state, as a file, agrees with its weights.
  assert.deepEqual(weightsOfCheckpoint(want.bytes), want.weights);
});

Deno.test("workers: a (2, 2) in-process checkpoint resumes a (2, 2) workers model bit for bit, and a (2, 1) workers model within rel 1e-6; every worker ends", async () => {
  const { run: want, mid } = await uninterruptedAt22(SGD);
  {
    await using m = await build(2, 2, SGD, { rankGroup: "workers", resume: mid }, 99);
    assert.equal(m.rankGroup, "workers");
    assert.equal(m.dataParallel, 2);
    const r = await m.train(batches.slice(N));
    assert.deepEqual(r.steps.map((s) => s.loss), want.losses.slice(N), "losses");
    assert.deepEqual(await m.checkpointBytes({ data: { at: "end" } }), want.bytes, "state");
  }
  {
    await using m = await build(2, 1, SGD, { rankGroup: "workers" }, 99);
    await m.loadCheckpoint(mid);
    assert.deepEqual(await m.checkpointBytes({ data: { at: "middle" } }), mid, "round trip");
    const r = await m.train(batches.slice(N));
    const lossErr = maxRelative(r.steps.map((s) => s.loss), want.losses.slice(N));
    assert.ok(lossErr <= TOL, `losses off by ${lossErr}`);
    const err = paramError(tensorsOf(await m.saveSafetensors()), want.weights);
    assert.ok(err.worst <= TOL, `${err.worstName} off by ${err.worst} relative`);
  }
  assert.equal(liveWorkers(), 0, "every worker ended");
});

Deno.test("a bad checkpoint is refused by a (2, 2) model before any rank loads it: the model unchanged", async () => {
  const { mid } = await uninterruptedAt22(SGD);
  await using m = await build(2, 2, SGD);
  await m.train(batches.slice(0, 1));
  const before = await m.checkpointBytes();
  const adam = await (async () => {
    await using a = await build(1, 1, ADAMW);
    return await a.checkpointBytes();
  })();
  for (
    const [label, bytes, re] of [
      ["another optimizer", adam, /^checkpoint: its optimizer is adamw, the model's is sgd/],
      ["truncated", mid.slice(0, mid.length - 8), /^checkpoint: not a valid safetensors file/],
    ] as const
  ) {
    await assert.rejects(() => m.loadCheckpoint(bytes), (e: Error) => {
      assert.match(e.message, re, label);
      return true;
    });
    assert.deepEqual(await m.checkpointBytes(), before, `${label}: unchanged`);
    assert.equal(m.stepCount, 1);
  }
});
