import assert from "node:assert/strict";
import { crossEntropyLoss, mseLoss } from "../../../src/nn/losses.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { Tanh } from "../../../src/nn/tanh.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { loadSafetensors } from "../../../src/nn/safetensors.ts";
import type {
  PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { cpu, cpuModel, gpt, tokenBatches } from "./_reference_training.ts";

const batches = tokenBatches(4, 9, 31);
const evalBatch = tokenBatches(1, 10, 99)[0];

function build(options: Partial<PipelineParallelModelOptions> = {}) {
  return cpuModel({
    schedule: "zb-v",
    microBatches: 4,
    optimizer: { kind: "adamw", lr: 1e-2 },
    ...options,
  });
}

/** Single-device loss and correct rows (first maximal logit) of `net` on the batch. */
async function singleDevice(bytes: Uint8Array) {
  const net = gpt();
  loadSafetensors(net, bytes);
  const x = cpu.fromData(evalBatch.inputs, evalBatch.shape);
  const y = net.forward(x, { save: false });
  const t = cpu.fromData(evalBatch.targets, evalBatch.shape);
  const r = crossEntropyLoss(y, t);
  const logits = await y.toArray();
  const V = y.shape[y.shape.length - 1];
  let correct = 0;
  for (let row = 0; row < evalBatch.targets.length; row++) {
    let best = 0;
    for (let c = 1; c < V; c++) if (logits[row * V + c] > logits[row * V + best]) best = c;
    if (best === evalBatch.targets[row]) correct++;
  }
  const loss = (await r.loss.toArray())[0];
  for (const z of [x, y, t, r.loss, r.grad]) z.dispose();
  net.dispose();
  return { loss, correct };
}

Deno.test("evaluate (cross-entropy): the single-device loss and accuracy (first maximal logit) of the current weights", async () => {
  await using m = await build();
  await m.train(batches.slice(0, 2));
  const want = await singleDevice(await m.saveSafetensors());
  const e = await m.evaluate(evalBatch);
  assert.ok(Math.abs(e.loss - want.loss) / want.loss <= 1e-6, `${e.loss} vs ${want.loss}`);
  assert.equal(e.rows, 10 * 6);
  assert.equal(e.correct, want.correct);
  assert.equal(e.accuracy, want.correct / e.rows);
  for (const info of await m.rankInfo()) assert.deepEqual(info.heldKeys, [], "nothing kept");
});

Deno.test("evaluate touches no gradient, optimizer state or step count: training after it equals training without it, bit for bit", async () => {
  await using a = await build();
  await using b = await build();
  await a.train(batches.slice(0, 2));
  await b.train(batches.slice(0, 2));
  const before = await b.checkpointBytes();
  const e1 = await b.evaluate(evalBatch);
  await b.evaluate(batches[3]);
  assert.deepEqual(await b.checkpointBytes(), before, "state unchanged");
  assert.equal(b.stepCount, 2);
  assert.equal((await b.evaluate(evalBatch)).loss, e1.loss, "evaluation is repeatable");
  const ra = await a.train(batches.slice(2));
  const rb = await b.train(batches.slice(2));
  assert.deepEqual(rb.steps.map((s) => s.loss), ra.steps.map((s) => s.loss));
  assert.deepEqual(await b.checkpointBytes(), await a.checkpointBytes());
});

Deno.test("evaluate (mse): the loss, no accuracy; refused batches name the rule", async () => {
  const net = new Sequential([
    new Linear(cpu, 3, 5, { seed: 1 }),
    new Tanh(cpu),
    new Linear(cpu, 5, 2, { seed: 2 }),
  ]);
  const inputs = new Float32Array(18).map((_, i) => Math.sin(i));
  const targets = new Float32Array(12).map((_, i) => Math.cos(i));
  const x = cpu.fromData(inputs, [6, 3]), t = cpu.fromData(targets, [6, 2]);
  const y = net.forward(x, { save: false });
  const r = mseLoss(y, t);
  const want = (await r.loss.toArray())[0];
  for (const z of [x, t, y, r.loss, r.grad]) z.dispose();
  await using m = await build({ model: net, loss: "mse", schedule: "1f1b", microBatches: 3 });
  net.dispose();
  const e = await m.evaluate({ inputs, shape: [6, 3], targets });
  assert.ok(Math.abs(e.loss - want) / want <= 1e-6);
  assert.equal(e.rows, 6);
  assert.equal(e.accuracy, undefined);
  assert.equal(e.correct, undefined);
  await assert.rejects(
    () => m.evaluate({ inputs: inputs.slice(0, 6), shape: [2, 3], targets: targets.slice(0, 4) }),
    /batch has 2 rows \(dim 0\), fewer than the 3 micro-batches/,
  );
});

Deno.test("evaluate in workers equals evaluate in-process", async () => {
  await using a = await build();
  const want = await a.evaluate(evalBatch);
  {
    await using w = await build({ rankGroup: "workers" });
    assert.deepEqual(await w.evaluate(evalBatch), want);
  }
  assert.equal(liveWorkers(), 0);
});
