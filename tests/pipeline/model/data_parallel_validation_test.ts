// Post-validation across data-parallel replicas: a NaN made on one replica
// rolls the step back on every replica (the averaged gradients carry it to
// all), and global-norm clipping equals single-device clipping on the whole
// batch, both without a barrier.

import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { GELU } from "../../../src/nn/gelu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Rng } from "../../../src/tensor/random.ts";
import { FixedPartition } from "../../../src/pipeline/partition/partition.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { parseSafetensors } from "../../../src/nn/safetensors.ts";
import { cpu, cpuModel, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";
import { NanAt, type NanAtOptions } from "./_nan_layer.ts";

const NAN_MODULE = new URL("./_nan_layer.ts", import.meta.url).href;
const ROWS = 8, M = 2; // D = 2: shards of 4 rows (replica 1 holds rows 4..7), micro-batches of 2
const never: NanAtOptions = { step: -1, row: 0, pass: "forward" };

function net(at: NanAtOptions): Sequential {
  const layers = [];
  for (let s = 0; s < 4; s++) {
    layers.push(new Linear(cpu, s === 0 ? 3 : 6, 6, { seed: 10 + s }));
    layers.push(new NanAt(cpu, s === 1 ? at : never));
    layers.push(new GELU(cpu));
  }
  layers.push(new Linear(cpu, 6, 2, { seed: 20 }));
  return new Sequential(layers);
}
const rng = new Rng(9);
const batches = Array.from({ length: 3 }, () => ({
  inputs: new Float32Array(ROWS * 3).map(() => rng.next() * 2 - 1),
  shape: [ROWS, 3],
  targets: new Float32Array(ROWS * 2).map(() => rng.next()),
}));

async function build(
  model: Sequential,
  o: Partial<PipelineParallelModelOptions> = {},
): Promise<PipelineParallelModel> {
  const m = await PipelineParallelModel.create({
    model,
    schedule: "interleaved-1f1b",
    ranks: 2,
    microBatches: M,
    dataParallel: 2,
    optimizer: { kind: "adamw", lr: 0.01 },
    loss: "mse",
    backend: "cpu",
    rankGroup: "in-process",
    partition: new FixedPartition([0, 3, 6, 9, 13]),
    inputShape: [1, 3],
    modules: [NAN_MODULE],
    ...o,
  });
  model.dispose();
  return m;
}

async function state(m: PipelineParallelModel): Promise<Map<string, Float32Array>> {
  // checkpointBytes refuses replicas whose weights or optimizer state differ.
  const out = new Map<string, Float32Array>();
  for (const [k, e] of parseSafetensors(await m.checkpointBytes()).tensors) out.set(k, e.data);
  return out;
}

Deno.test("(D, P) = (2, 2): a NaN on one replica rolls the step back on every replica; training goes on as without that batch, bit for bit", async () => {
  const ref = await build(net(never));
  await ref.train([batches[0]]);
  await ref.train([batches[2]]);
  const want = await state(ref);
  await ref.dispose();
  for (const pass of ["forward", "backward"] as const) {
    // Row 6: replica 1's second micro-batch; replica 0 sees nothing wrong.
    const m = await build(net({ step: 1, row: 6, pass }));
    try {
      const r = await m.train(batches);
      assert.deepEqual(r.steps.map((s) => s.skipped === true), [false, true, false], pass);
      const got = await state(m);
      assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort());
      for (const [k, v] of want) assert.deepEqual(got.get(k), v, `${pass}: ${k}`);
    } finally {
      await m.dispose();
    }
  }
});

Deno.test("(D, P) = (2, 2) and (2, 1): global-norm clipping equals single-device clipGradNorm on the whole batch", async () => {
  const SGD = { kind: "sgd" as const, lr: 0.1, momentum: 0.9 };
  const gb = tokenBatches(3, 8);
  const want = await referenceTraining(gpt(), SGD, gb, "cross-entropy", 0.05);
  for (const [d, p] of [[2, 2], [2, 1]] as const) {
    const m = await cpuModel({
      schedule: "zb-h1",
      ranks: p,
      microBatches: 2,
      optimizer: SGD,
      dataParallel: d,
      clipGradNorm: 0.05,
    });
    try {
      const r = await m.train(gb);
      const norms = r.steps.map((s) => s.gradNorm!);
      assert.ok(maxRelative(norms, want.gradNorms) <= 1e-5, `norms ${norms} vs ${want.gradNorms}`);
      assert.ok(want.gradNorms.every((n) => n > 0.05), "every step is clipped");
      const err = paramError(tensorsOf(await m.saveSafetensors()), want.tensors);
      assert.ok(err.worst <= 1e-6, `(${d}, ${p}): ${err.worstName} off by ${err.worst}`);
    } finally {
      await m.dispose();
    }
  }
});
