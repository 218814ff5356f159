// ZeRO-1 (`shardOptimizer: true` with `dataParallel: D`): each replica of a
// pipeline rank keeps and steps 1/D of each stage's optimizer state; the
// gradients are reduce-scattered and the updated parameters all-gathered.
// Training equals the unsharded run and single-device training, checkpoints
// are the single-device format, and the optimizer bytes per rank are 1/D.

import assert from "node:assert/strict";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import { createOptimizer } from "../../../src/nn/optimizer_spec.ts";
import { SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import {
  loadTrainingCheckpoint,
  saveTrainingCheckpoint,
} from "../../../src/nn/training_checkpoint.ts";
import { cpu, cpuModel, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { NanAt, type NanAtOptions } from "./_nan_layer.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { GELU } from "../../../src/nn/gelu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Rng } from "../../../src/tensor/random.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";

// Sharded against unsharded: 1e-6 (the same sums: in practice the same bits).
const TOL = 1e-6;
// Against single-device training, or across different D: 1e-5 for SGD. The
// CPU backend sums in f32, and D replicas sum their shards' gradients before
// the average where one device (or D = 1) sums the whole batch's: another
// order (measured 1.5e-6). AdamW turns the rounding of near-zero gradients
// into steps of about lr: 1e-3 of the largest entry across different D
// (measured 1.7e-4).
const SINGLE_DEVICE_TOL = 1e-5;
const ACROSS_D_ADAMW_TOL = 1e-3;
const NAN_MODULE = new URL("./_nan_layer.ts", import.meta.url).href;
const never: NanAtOptions = { step: -1, row: 0, pass: "forward" };

// A small MLP whose stage-1 layer makes a NaN where `at` says.
function nanNet(at: NanAtOptions): Sequential {
  const layers = [];
  for (let s = 0; s < 4; s++) {
    layers.push(new Linear(cpu, s === 0 ? 3 : 6, 6, { seed: 10 + s }));
    layers.push(new NanAt(cpu, s === 1 ? at : never));
    layers.push(new GELU(cpu));
  }
  layers.push(new Linear(cpu, 6, 2, { seed: 20 }));
  return new Sequential(layers);
}
const nanRng = new Rng(9);
const nanBatches = Array.from({ length: 3 }, () => ({
  inputs: new Float32Array(8 * 3).map(() => nanRng.next() * 2 - 1),
  shape: [8, 3],
  targets: new Float32Array(8 * 2).map(() => nanRng.next()),
}));
const M = 4;
const ROWS = 16;
const ADAMW: OptimizerSpec = { kind: "adamw", lr: 0.01, weightDecay: 0.1 };
const SGD: OptimizerSpec = { kind: "sgd", lr: 0.1, momentum: 0.9 };
const batches = tokenBatches(3, ROWS);
const refSgd = await referenceTraining(gpt(), SGD, batches);

type Options = Partial<PipelineParallelModelOptions>;

async function withModel<T>(
  o: Options,
  body: (m: PipelineParallelModel) => Promise<T>,
  extra: Options = {},
) {
  const m = await cpuModel({ microBatches: M, optimizer: ADAMW, ...o, ...extra });
  try {
    return await body(m);
  } finally {
    await m.dispose();
  }
}

function expectClose(
  tensors: Map<string, Float32Array>,
  losses: readonly number[],
  ref: { tensors: Map<string, Float32Array>; losses: number[] },
  label: string,
  tol = TOL,
) {
  const err = paramError(tensors, ref.tensors);
  assert.ok(err.worst <= tol, `${label}: ${err.worstName} off by ${err.worst} relative`);
  const lossErr = maxRelative(losses, ref.losses);
  assert.ok(lossErr <= tol, `${label}: losses off by ${lossErr}`);
}

// Trains with `o` (checking the checkpoint gathers after every step) and
// returns the weights and losses.
async function trained(o: Options) {
  return await withModel(o, async (m) => {
    let checked = 0;
    const r = await m.train(batches, {
      onStep: async () => {
        // The replicas' weights agree bit for bit; the checkpoint joins their shares.
        await m.saveSafetensors();
        await m.checkpointBytes();
        checked++;
      },
    });
    assert.equal(checked, batches.length);
    return { tensors: tensorsOf(await m.saveSafetensors()), losses: r.steps.map((s) => s.loss) };
  });
}

for (const [d, p] of [[2, 1], [2, 2], [4, 1]] as const) {
  Deno.test(`in-process, (D, P) = (${d}, ${p}), shardOptimizer: SGD with momentum equals single-device training (rel ${SINGLE_DEVICE_TOL}) and AdamW the unsharded run (rel ${TOL}); checkpoints gathered after every step`, async () => {
    const shape = { schedule: "1f1b" as const, ranks: p, dataParallel: d };
    const sgd = await trained({ ...shape, shardOptimizer: true, optimizer: SGD });
    expectClose(sgd.tensors, sgd.losses, refSgd, `sgd at (${d}, ${p})`, SINGLE_DEVICE_TOL);
    // AdamW amplifies the last bits of tiny gradients (the unsharded run is
    // ~1e-3 off single-device on a near-zero bias): sharding must not move it.
    const whole = await trained({ ...shape, optimizer: ADAMW });
    const sharded = await trained({ ...shape, shardOptimizer: true, optimizer: ADAMW });
    expectClose(sharded.tensors, sharded.losses, whole, `adamw at (${d}, ${p})`);
  });
}

Deno.test("in-process, (2, 2), shardOptimizer: every schedule equals the unsharded run (AdamW)", async () => {
  for (const name of SCHEDULE_NAMES) {
    const shape = { schedule: name, ranks: 2, dataParallel: 2 };
    const whole = await trained(shape);
    const sharded = await trained({ ...shape, shardOptimizer: true });
    expectClose(sharded.tensors, sharded.losses, whole, `${name} sharded`);
  }
});

Deno.test("shardOptimizer: optimizer bytes per rank are 1/D of the unsharded run's (AdamW, (2, 1) and (4, 1))", async () => {
  const stateBytes = async (o: Options) =>
    await withModel({ schedule: "1f1b", ranks: 1, ...o }, async (m) => {
      await m.train(batches.slice(0, 1));
      return (await m.rankInfo()).map((i) => i.optimizerBytes);
    });
  const whole = await stateBytes({ dataParallel: 2 });
  const half = await stateBytes({ dataParallel: 2, shardOptimizer: true });
  const quarter = await stateBytes({ dataParallel: 4, shardOptimizer: true });
  // AdamW: exp_avg and exp_avg_sq of every parameter, 4 bytes each.
  const n = gpt().parameters().reduce((a, p) => a + p.value.size, 0);
  assert.deepEqual(whole, [8 * n, 8 * n]);
  assert.equal(half.reduce((a, b) => a + b, 0), 8 * n, "the shares cover the state once");
  for (const b of half) assert.ok(Math.abs(b - 4 * n) <= 8, `${b} vs ${4 * n}`);
  for (const b of quarter) assert.ok(Math.abs(b - 2 * n) <= 8, `${b} vs ${2 * n}`);
});

Deno.test("shardOptimizer: a (2, 2) sharded checkpoint is the single-device file; it resumes sharded and unsharded (D, P), each equal to the uninterrupted run", async () => {
  const full = await withModel(
    { schedule: "zb-h1", ranks: 2, dataParallel: 2, shardOptimizer: true },
    async (m) => {
      await m.train(batches.slice(0, 2));
      const bytes = await m.checkpointBytes();
      await m.train(batches.slice(2));
      return { bytes, tensors: tensorsOf(await m.saveSafetensors()) };
    },
  );
  // The single-device model loads it and writes the same bytes back.
  const single = gpt();
  const opt = createOptimizer(ADAMW, single.parameters());
  try {
    const info = loadTrainingCheckpoint(single, opt, full.bytes);
    const again = await saveTrainingCheckpoint(single, opt, { step: info.step });
    assert.deepEqual(again, full.bytes, "the single-device model writes the same bytes back");
    const unsharded = await withModel(
      { schedule: "zb-h1", ranks: 2, dataParallel: 2 },
      async (m) => {
        await m.loadCheckpoint(full.bytes);
        return await m.checkpointBytes();
      },
    );
    assert.deepEqual(unsharded, full.bytes, "an unsharded (2, 2) model writes the same bytes back");
  } finally {
    opt.dispose();
    single.dispose();
  }
  for (const [d, p, shard] of [[2, 2, true], [1, 2, false], [2, 1, true], [4, 1, true]] as const) {
    await withModel(
      { schedule: "1f1b", ranks: p, dataParallel: d, shardOptimizer: shard },
      async (m) => {
        await m.loadCheckpoint(full.bytes);
        await m.train(batches.slice(2));
        const err = paramError(tensorsOf(await m.saveSafetensors()), full.tensors);
        const tol = d === 2 ? TOL : ACROSS_D_ADAMW_TOL;
        assert.ok(err.worst <= tol, `(${d}, ${p}) sharded ${shard}: ${err.worst}`);
      },
    );
  }
});

Deno.test("shardOptimizer: global-norm clipping with an lr schedule equals the unsharded run", async () => {
  const spec: OptimizerSpec = {
    kind: "adamw",
    lr: 0.01,
    lrSchedule: { kind: "warmup-cosine", warmupSteps: 1, decaySteps: 3 },
  };
  const run = async (shardOptimizer: boolean) =>
    await withModel(
      { schedule: "zb-v", ranks: 2, dataParallel: 2, shardOptimizer, optimizer: spec },
      async (m) => {
        const r = await m.train(batches);
        return {
          norms: r.steps.map((s) => s.gradNorm ?? NaN),
          lrs: r.steps.map((s) => s.lr),
          tensors: tensorsOf(await m.checkpointBytes()),
          losses: r.steps.map((s) => s.loss),
        };
      },
      { clipGradNorm: 0.5 },
    );
  const whole = await run(false);
  const sharded = await run(true);
  assert.ok(whole.norms.every((n) => n > 0.5), `every step clipped: ${whole.norms}`);
  assert.ok(maxRelative(sharded.norms, whole.norms) <= TOL, `${sharded.norms} vs ${whole.norms}`);
  assert.deepEqual(sharded.lrs, whole.lrs);
  expectClose(sharded.tensors, sharded.losses, whole, "clipped");
});

Deno.test("shardOptimizer: a NaN on one replica rolls the step back on every replica, as unsharded (bit for bit)", async () => {
  const state = async (shardOptimizer: boolean, at: NanAtOptions) => {
    const m = await PipelineParallelModel.create({
      model: nanNet(at),
      schedule: "1f1b",
      ranks: 2,
      microBatches: 2,
      dataParallel: 2,
      shardOptimizer,
      optimizer: { kind: "adamw", lr: 0.01 },
      loss: "mse",
      backend: "cpu",
      rankGroup: "in-process",
      inputShape: [1, 3],
      modules: [NAN_MODULE],
    });
    try {
      const r = await m.train(nanBatches);
      return { skipped: r.steps.map((s) => s.skipped === true), bytes: await m.checkpointBytes() };
    } finally {
      await m.dispose();
    }
  };
  // Row 6: replica 1's second micro-batch; replica 0 sees nothing wrong.
  const at: NanAtOptions = { step: 1, row: 6, pass: "backward" };
  const whole = await state(false, at);
  const sharded = await state(true, at);
  assert.deepEqual(whole.skipped, [false, true, false]);
  assert.deepEqual(sharded.skipped, whole.skipped);
  assert.deepEqual(sharded.bytes, whole.bytes);
});

Deno.test("workers, (2, 2), shardOptimizer: equals the in-process unsharded run (AdamW); every worker ends", async () => {
  const shape = { schedule: "zb-h1" as const, ranks: 2, dataParallel: 2 };
  const whole = await trained(shape);
  const sharded = await trained({ ...shape, shardOptimizer: true, rankGroup: "workers" });
  expectClose(sharded.tensors, sharded.losses, whole, "workers");
  assert.equal(liveWorkers(), 0);
});

Deno.test("shardOptimizer is checked with the other options", async () => {
  await assert.rejects(
    () =>
      cpuModel({
        schedule: "1f1b",
        microBatches: M,
        optimizer: SGD,
        shardOptimizer: "yes" as never,
      }),
    /shardOptimizer must be a boolean, got "yes"/,
  );
  await assert.rejects(
    () =>
      cpuModel(
        { schedule: "1f1b", microBatches: M, optimizer: SGD, shardOptimzer: true } as Options,
      ),
    /shardOptimzer.*did you mean shardOptimizer/,
  );
});

Deno.test("shardOptimizer: weights loaded with loadSafetensors reach every share (training then equals the unsharded model's)", async () => {
  const start = await withModel({ schedule: "1f1b", ranks: 2 }, async (m) => {
    await m.train(batches.slice(0, 1));
    return await m.saveSafetensors();
  });
  const after = async (shardOptimizer: boolean) =>
    await withModel({ schedule: "1f1b", ranks: 2, dataParallel: 2, shardOptimizer }, async (m) => {
      await m.loadSafetensors(start);
      await m.train(batches.slice(1));
      return tensorsOf(await m.saveSafetensors());
    });
  const whole = await after(false);
  const sharded = await after(true);
  const err = paramError(sharded, whole);
  assert.ok(err.worst <= TOL, `${err.worstName}: ${err.worst}`);
  // Not the run from the initial weights: the loaded ones were used.
  const fresh = await withModel(
    { schedule: "1f1b", ranks: 2, dataParallel: 2, shardOptimizer: true },
    async (m) => {
      await m.train(batches.slice(1));
      return tensorsOf(await m.saveSafetensors());
    },
  );
  assert.ok(paramError(fresh, whole).worst > 1e-3);
});
