// A step whose loss or gradients are not finite changes no parameter and no
// optimizer state on any stage, bit for bit, without a barrier between
// steps: a NaN made at any stage, micro-batch and pass rolls that step back
// everywhere (and replays whatever began on its weights); training around it
// equals training without that batch.

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
import { NonFiniteStepError } from "../../../src/pipeline/model/results.ts";
import { parseSafetensors } from "../../../src/nn/safetensors.ts";
import { parseTrainingCheckpoint } from "../../../src/nn/training_checkpoint.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { cpu } from "./_reference_training.ts";
import { NanAt, type NanAtOptions } from "./_nan_layer.ts";

const NAN_MODULE = new URL("./_nan_layer.ts", import.meta.url).href;
const ROWS = 8, M = 4; // micro-batches of 2 rows: first rows 0, 2, 4, 6
const never: NanAtOptions = { step: -1, row: 0, pass: "forward" };

// Four stages, each [Linear, NanAt, (GELU)]; `at` puts the NaN in stage `stage`.
function net(stage: number, at: NanAtOptions): Sequential {
  const layers = [];
  for (let s = 0; s < 4; s++) {
    layers.push(new Linear(cpu, s === 0 ? 3 : 6, 6, { seed: 10 + s }));
    layers.push(new NanAt(cpu, s === stage ? at : never));
    layers.push(new GELU(cpu));
  }
  layers.push(new Linear(cpu, 6, 2, { seed: 20 }));
  return new Sequential(layers);
}
// 13 layers: stages [0,3) [3,6) [6,9) [9,13).
const CUT = new FixedPartition([0, 3, 6, 9, 13]);

const rng = new Rng(9);
const batches = Array.from({ length: 3 }, () => ({
  inputs: new Float32Array(ROWS * 3).map(() => rng.next() * 2 - 1),
  shape: [ROWS, 3],
  targets: new Float32Array(ROWS * 2).map(() => rng.next()),
}));

async function build(
  model: Sequential,
  o: Partial<PipelineParallelModelOptions>,
): Promise<PipelineParallelModel> {
  const m = await PipelineParallelModel.create({
    model,
    schedule: "interleaved-1f1b",
    ranks: 2,
    microBatches: M,
    optimizer: { kind: "adamw", lr: 0.01 },
    loss: "mse",
    backend: "cpu",
    rankGroup: "in-process",
    partition: CUT,
    inputShape: [1, 3],
    modules: [NAN_MODULE],
    ...o,
  });
  model.dispose();
  return m;
}

/** Every parameter and optimizer-state tensor, by name. */
async function state(m: PipelineParallelModel): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const [k, e] of parseSafetensors(await m.checkpointBytes()).tensors) out.set(k, e.data);
  return out;
}

function assertBitwise(a: Map<string, Float32Array>, b: Map<string, Float32Array>, what: string) {
  assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort(), `${what}: tensor names`);
  for (const [k, v] of a) {
    const w = b.get(k)!;
    assert.ok(
      new Uint8Array(v.buffer, v.byteOffset, v.byteLength).every((x, i) =>
        x === new Uint8Array(w.buffer, w.byteOffset, w.byteLength)[i]
      ),
      `${what}: ${k} differs`,
    );
  }
}

for (const schedule of ["zb-h1", "interleaved-1f1b"] as const) {
  Deno.test(`non-finite (${schedule}, in-process): a NaN at any stage, micro-batch and pass skips exactly that step`, async () => {
    const o = {
      schedule,
      stagesPerRank: schedule === "zb-h1" ? 1 : 2,
      ranks: schedule === "zb-h1" ? 4 : 2,
    };
    // Reference: the same pipeline trained on batches 0 and 2 only.
    const ref = await build(net(0, never), o);
    await ref.train([batches[0]]);
    await ref.train([batches[2]]);
    const want = await state(ref);
    await ref.dispose();
    for (let stage = 0; stage < 4; stage++) {
      for (const row of [0, 6]) {
        for (const pass of ["forward", "backward"] as const) {
          // Step 1 of the call is the bad one; steps 0 and 2 interlock with it.
          const m = await build(net(stage, { step: 1, row, pass }), o);
          const r = await m.train(batches);
          const what = `NaN at stage ${stage}, row ${row}, ${pass}`;
          assert.deepEqual(r.steps.map((s) => s.skipped === true), [false, true, false], what);
          const where = r.steps[1].nonFinite!;
          if (pass === "forward") {
            assert.deepEqual(where, { stage: 3, what: "loss", microBatch: row / 2 }, what);
          } else {
            // The stage's own Linear gets the NaN gradient first (W = xᵀ·dy).
            assert.deepEqual(where, { stage, what: "gradient" }, what);
          }
          assertBitwise(await state(m), want, what);
          await m.dispose();
        }
      }
    }
  });
}

Deno.test('non-finite: "throw" rolls the step back and stops train with NonFiniteStepError; the model goes on', async () => {
  const m = await build(net(2, { step: 1, row: 4, pass: "forward" }), {
    schedule: "zb-h1",
    ranks: 4,
    stagesPerRank: 1,
    nonFinite: "throw",
  });
  const e = await m.train(batches).then(() => null, (x) => x as Error);
  assert.ok(e instanceof NonFiniteStepError, String(e));
  assert.equal(
    e.message,
    "step 1 was rolled back: stage 3 found a non-finite loss in micro-batch 2",
  );
  const after = await state(m);
  // Only step 0 stands: as a model trained on batch 0 alone.
  const ref = await build(net(0, never), { schedule: "zb-h1", ranks: 4, stagesPerRank: 1 });
  await ref.train([batches[0]]);
  assertBitwise(after, await state(ref), "after the throw");
  await ref.dispose();
  // The model is usable: the next call trains (step 2 of its life, no NaN there).
  const r = await m.train([batches[2]]);
  assert.equal(r.steps[0].skipped, undefined);
  await m.dispose();
});

Deno.test("non-finite in workers (zb-v): a NaN gradient at stage 2 skips the step on both ranks", async () => {
  const o = {
    schedule: "zb-v" as const,
    ranks: 2,
    stagesPerRank: 2,
    rankGroup: "workers" as const,
  };
  const ref = await build(net(0, never), o);
  await ref.train([batches[0]]);
  await ref.train([batches[2]]);
  const want = await state(ref);
  await ref.dispose();
  const m = await build(net(2, { step: 1, row: 2, pass: "backward" }), o);
  const r = await m.train(batches);
  assert.deepEqual(r.steps.map((s) => s.skipped === true), [false, true, false]);
  assertBitwise(await state(m), want, "workers");
  await m.dispose();
  assert.equal(liveWorkers(), 0);
});

Deno.test("loadSafetensors of a file holding NaN is refused before any change; allowNonFinite loads it", async () => {
  const m = await build(net(0, never), { schedule: "1f1b", ranks: 4, stagesPerRank: 1 });
  try {
    const good = await m.saveSafetensors();
    const file = parseSafetensors(good);
    const [name] = [...file.tensors.keys()];
    const { saveSafetensors } = await import("../../../src/nn/safetensors.ts");
    const params = [...file.tensors].map(([n, e]) => {
      const data = e.data.slice();
      if (n === name) data[1] = Infinity;
      const value = cpu.fromData(data, e.shape);
      return { name: n, value, grad: value };
    });
    const bad = await saveSafetensors(params);
    for (const p of params) p.value.dispose();
    await assert.rejects(
      m.loadSafetensors(bad),
      new RegExp(`tensor ${name.replaceAll(".", "\\.")} holds Infinity at index 1`),
    );
    assert.deepEqual(await m.saveSafetensors(), good, "unchanged");
    await m.loadSafetensors(bad, { allowNonFinite: true });
    assert.notDeepEqual(await m.saveSafetensors(), good);
  } finally {
    await m.dispose();
  }
});

Deno.test("a skipped step counts as a training step everywhere: stepCount, the checkpoint's step (its optimizer_step counts the applied ones) and the next step's index agree; 2 steps with a skip, a checkpoint and 2 resumed steps equal 4 uninterrupted steps (numbering, skips, losses, bytes)", async () => {
  const o = { schedule: "zb-h1" as const, ranks: 4, stagesPerRank: 1 };
  const at: NanAtOptions = { step: 1, row: 2, pass: "forward" }; // step 1 of the model's life
  const four = [...batches, batches[0]];
  const whole = await build(net(1, at), o);
  const w = await whole.train(four);
  assert.deepEqual(w.steps.map((s) => [s.step, s.skipped === true]), [
    [0, false],
    [1, true],
    [2, false],
    [3, false],
  ]);
  assert.equal(whole.stepCount, 4);
  const wantBytes = await whole.checkpointBytes();
  await whole.dispose();

  const first = await build(net(1, at), o);
  const a = await first.train(four.slice(0, 2));
  assert.equal(first.stepCount, 2);
  const mid = await first.checkpointBytes();
  await first.dispose();
  const ck = parseTrainingCheckpoint(mid);
  assert.deepEqual(
    [ck.step, ck.optimizerStep, ck.skippedSteps],
    [2, 1, 1],
    "the checkpoint's step is the model's stepCount; its optimizer applied 1 step",
  );
  const resumed = await build(net(1, at), { ...o, resume: mid });
  assert.equal(resumed.stepCount, 2, "resumed: the next step is step 2, as uninterrupted");
  const b = await resumed.train(four.slice(2));
  const got = [...a.steps, ...b.steps];
  assert.deepEqual(got.map((s) => s.step), [0, 1, 2, 3], "numbering");
  assert.deepEqual(got.map((s) => s.skipped === true), [false, true, false, false], "skips");
  assert.deepEqual(
    got.map((s) => s.loss),
    w.steps.map((s) => s.loss),
    "losses, exactly",
  );
  assert.deepEqual(got.map((s) => s.lr), w.steps.map((s) => s.lr), "lrs");
  assert.deepEqual(
    await resumed.checkpointBytes(),
    wantBytes,
    "the same checkpoint, byte for byte",
  );
  await resumed.dispose();
});
