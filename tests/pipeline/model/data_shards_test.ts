import assert from "node:assert/strict";
import { shardBatch } from "../../../src/pipeline/model/data_shards.ts";
import type { TrainingBatch } from "../../../src/pipeline/model/batch.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import { Rng } from "../../../src/tensor/random.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { Tanh } from "../../../src/nn/tanh.ts";
import { crossEntropyLoss, mseLoss } from "../../../src/nn/losses.ts";
import { createTinyGPT } from "../../../src/nn/gpt.ts";
import { sampleBatch } from "../../../src/nn/sample_batch.ts";
import { CharTokenizer } from "../../../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../../../src/nn/data/tiny_corpus.ts";

const cpu = new CpuBackend();

Deno.test("shardBatch: equal shards in row order, inputs and targets alike (hand-computed)", () => {
  // 6 rows of [2, 2] inputs (4 values a row), 2 targets a row.
  const inputs = Float32Array.from({ length: 24 }, (_, i) => i);
  const targets = Float32Array.from({ length: 12 }, (_, i) => 100 + i);
  const shards = shardBatch({ inputs, shape: [6, 2, 2], targets }, 3);
  assert.equal(shards.length, 3);
  assert.deepEqual(shards.map((s) => s.shape), [[2, 2, 2], [2, 2, 2], [2, 2, 2]]);
  assert.deepEqual([...shards[0].inputs], [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual([...shards[1].inputs], [8, 9, 10, 11, 12, 13, 14, 15]);
  assert.deepEqual([...shards[2].inputs], [16, 17, 18, 19, 20, 21, 22, 23]);
  assert.deepEqual([...shards[0].targets], [100, 101, 102, 103]);
  assert.deepEqual([...shards[2].targets], [108, 109, 110, 111]);
  // Copies: changing a shard leaves the batch alone.
  shards[0].inputs[0] = -1;
  assert.equal(inputs[0], 0);
  assert.equal(shards[0].microBatchSizes, undefined);
});

Deno.test("shardBatch: D = 1 is the whole batch; D = rows gives one row a shard", () => {
  const b = {
    inputs: new Float32Array([1, 2, 3]),
    shape: [3],
    targets: new Float32Array([4, 5, 6]),
  };
  const [one] = shardBatch(b, 1);
  assert.deepEqual(one.shape, [3]);
  assert.deepEqual([...one.inputs], [1, 2, 3]);
  assert.notEqual(one.inputs, b.inputs);
  assert.deepEqual(shardBatch(b, 3).map((s) => [...s.inputs, ...s.targets]), [[1, 4], [2, 5], [
    3,
    6,
  ]]);
});

Deno.test("shardBatch: refuses what it cannot split, naming the batch size and D", () => {
  const b = { inputs: new Float32Array(10), shape: [5, 2], targets: new Float32Array(5) };
  assert.throws(() => shardBatch(b, 2), (e: Error) => {
    assert.ok(e instanceof RangeError);
    assert.match(e.message, /5 rows/);
    assert.match(e.message, /2 equal shards/);
    return true;
  });
  assert.throws(() => shardBatch(b, 6), /5 rows .* 6 equal shards/);
  for (const d of [0, -1, 1.5, NaN, "2"]) {
    assert.throws(() => shardBatch(b, d as number), RangeError, `replicas ${String(d)}`);
  }
  assert.throws(() => shardBatch(null as unknown as TrainingBatch, 1), TypeError);
  assert.throws(
    () => shardBatch({ ...b, inputs: new Float32Array(9) }, 1),
    /Float32Array of 10 values for shape \[5, 2\], got a Float32Array of 9/,
  );
  assert.throws(() => shardBatch({ ...b, shape: [5, 0] }, 1), /positive integers/);
  assert.throws(() => shardBatch({ ...b, targets: new Float32Array(7) }, 1), /multiple of the 5/);
  assert.throws(
    () => shardBatch({ ...b, microBatchSizes: [3, 2] }, 1),
    /microBatchSizes \[3, 2\]/,
  );
});

/** Each parameter's gradient after one forward and backward of `b` (its rows start at `row0`). */
async function gradients(
  model: Sequential,
  b: TrainingBatch,
  loss: "mse" | "cross-entropy",
  row0: number,
): Promise<Map<string, Float32Array>> {
  model.zeroGrad();
  const x = cpu.fromData(b.inputs, b.shape);
  const y = model.forward(x, { training: true, step: 0, rowOffset: row0 });
  const t = cpu.fromData(b.targets, loss === "mse" ? y.shape : y.shape.slice(0, -1));
  const r = loss === "mse" ? mseLoss(y, t) : crossEntropyLoss(y, t);
  model.backward(r.grad).dispose();
  const out = new Map<string, Float32Array>();
  for (const p of model.parameters()) out.set(p.name, await p.grad.toArray());
  for (const z of [x, y, t, r.loss, r.grad]) z.dispose();
  model.zeroGrad();
  return out;
}

/**
 * The whole batch's gradient against the float64 average of the D shards'
 * gradients: the largest per-tensor max|a − b| / max|b|.
 */
async function shardError(
  model: Sequential,
  b: TrainingBatch,
  d: number,
  loss: "mse" | "cross-entropy",
): Promise<number> {
  const whole = await gradients(model, b, loss, 0);
  const shards = shardBatch(b, d);
  const sums = new Map([...whole].map(([k, v]) => [k, new Float64Array(v.length)]));
  for (const [k, s] of shards.entries()) {
    const g = await gradients(model, s, loss, k * s.shape[0]);
    for (const [name, v] of g) {
      const acc = sums.get(name)!;
      for (let i = 0; i < v.length; i++) acc[i] += v[i];
    }
  }
  let worst = 0;
  for (const [name, w] of whole) {
    const acc = sums.get(name)!;
    let mx = 0, md = 0;
    for (let i = 0; i < w.length; i++) {
      mx = Math.max(mx, Math.abs(w[i]));
      md = Math.max(md, Math.abs(acc[i] / d - w[i]));
    }
    assert.ok(
      mx > 0,
      `${name}: the whole batch's gradient is zero, so the test would prove little`,
    );
    worst = Math.max(worst, md / mx);
  }
  return worst;
}

Deno.test("shardBatch: the average of the shards' mean-loss gradients is the whole batch's (MLP, mse)", async () => {
  const rng = new Rng(5);
  const model = new Sequential([
    new Linear(cpu, 3, 7, { seed: 1 }),
    new Tanh(cpu),
    new Linear(cpu, 7, 2, { seed: 2 }),
  ]);
  const rows = 12;
  const b = {
    inputs: Float32Array.from({ length: rows * 3 }, () => rng.next() * 2 - 1),
    shape: [rows, 3],
    targets: Float32Array.from({ length: rows * 2 }, () => rng.next() * 2 - 1),
  };
  for (const d of [2, 3, 4]) {
    const err = await shardError(model, b, d, "mse");
    assert.ok(err <= 1e-6, `D ${d}: relative error ${err}`);
  }
  model.dispose();
});

Deno.test("shardBatch: the average of the shards' mean-loss gradients is the whole batch's (tiny GPT, cross-entropy)", async () => {
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  const model = createTinyGPT(
    { vocabSize: tok.vocabSize, seqLen: 6, dim: 8, heads: 2, layers: 2, seed: 3 },
    cpu,
  );
  const t = sampleBatch(tok.encode(TINY_CORPUS), 8, 6, new Rng(7));
  const b = { inputs: t.ids, shape: t.shape, targets: t.targets };
  for (const d of [2, 4]) {
    const err = await shardError(model, b, d, "cross-entropy");
    assert.ok(err <= 1e-6, `D ${d}: relative error ${err}`);
  }
  // A shard's gradient alone is not the batch's: the test can tell them apart.
  const whole = await gradients(model, b, "cross-entropy", 0);
  const first = await gradients(model, shardBatch(b, 2)[0], "cross-entropy", 0);
  const name = [...whole.keys()][0];
  assert.notDeepEqual([...first.get(name)!], [...whole.get(name)!]);
  model.dispose();
});
