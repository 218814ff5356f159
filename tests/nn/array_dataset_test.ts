import assert from "node:assert/strict";
import { ArrayDataset, type ArrayDatasetOptions } from "../../src/nn/array_dataset.ts";
import { CharTokenizer } from "../../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../../src/nn/data/tiny_corpus.ts";
import { ModelCheckpoint } from "../../src/pipeline/model/callbacks/model_checkpoint.ts";
import { cpuModel, GPT } from "../pipeline/model/_reference_training.ts";

// 23 examples of 2 inputs each; the target is 10 × the first input plus the second.
const N = 23;
const inputs = Float32Array.from({ length: 2 * N }, (_, i) => (i % 2 === 0 ? i / 2 : -1));
const targets = Float32Array.from({ length: N }, (_, k) => 10 * k - 1);
const base: ArrayDatasetOptions = { inputs, shape: [N, 2], targets, batchSize: 5 };
const ids = (b: { inputs: Float32Array }) => [...b.inputs].filter((_, i) => i % 2 === 0);

Deno.test("ArrayDataset: every epoch a new permutation of the training examples (all of them, once), the held-out last ones never among them; targets stay with their inputs", () => {
  const ds = new ArrayDataset({ ...base, epochs: 3, seed: 7, validationSplit: 0.15 });
  assert.deepEqual([ds.size, ds.trainSize, ds.validationSize, ds.stepsPerEpoch, ds.steps], [
    23,
    20,
    3,
    4,
    12,
  ]);
  assert.deepEqual(ids(ds.validation()), [20, 21, 22]);
  assert.deepEqual([...ds.validation().targets], [199, 209, 219]);
  const batches = [...ds];
  assert.equal(batches.length, 12);
  const epochs = [0, 1, 2].map((e) => batches.slice(4 * e, 4 * e + 4).flatMap(ids));
  for (const order of epochs) {
    assert.deepEqual([...order].sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i));
  }
  assert.notDeepEqual(epochs[0], epochs[1]);
  assert.notDeepEqual(epochs[1], epochs[2]);
  assert.notDeepEqual(epochs[0], Array.from({ length: 20 }, (_, i) => i), "shuffled");
  for (const b of batches) {
    assert.deepEqual(b.shape, [5, 2]);
    assert.deepEqual([...b.targets], ids(b).map((k) => 10 * k - 1));
  }
  assert.ok(ds.done);
  assert.deepEqual([...ds], [], "nothing after the last epoch");
  // The same seed gives the same batches; another seed others; shuffle: false keeps the order.
  assert.deepEqual(
    [...new ArrayDataset({ ...base, epochs: 3, seed: 7, validationSplit: 0.15 })],
    batches,
  );
  assert.notDeepEqual(
    [...new ArrayDataset({ ...base, seed: 8, validationSplit: 0.15 })],
    batches.slice(0, 4),
  );
  assert.deepEqual(
    [...new ArrayDataset({ ...base, shuffle: false })].flatMap(ids),
    Array.from({ length: N }, (_, i) => i),
  );
});

Deno.test("ArrayDataset: the last short batch is kept, or dropped with dropLast", () => {
  const kept = [...new ArrayDataset({ ...base, shuffle: false })];
  assert.deepEqual(kept.map((b) => b.shape[0]), [5, 5, 5, 5, 3]);
  const dropped = new ArrayDataset({ ...base, dropLast: true, epochs: 2 });
  assert.deepEqual([dropped.stepsPerEpoch, dropped.steps], [4, 8]);
  assert.deepEqual([...dropped].map((b) => b.shape[0]), [5, 5, 5, 5, 5, 5, 5, 5]);
});

Deno.test("ArrayDataset: checkpointData then restore continues with the uninterrupted batches, across epochs; data for another dataset is refused naming the field", () => {
  const options = { ...base, epochs: 3, seed: 4, validationSplit: 0.1 };
  const whole = [...new ArrayDataset(options)];
  for (const k of [0, 1, 4, 5, 13]) {
    const ds = new ArrayDataset(options);
    for (let i = 0; i < k; i++) ds.next();
    const saved = ds.checkpointData();
    const resumed = new ArrayDataset(options);
    resumed.restore({ data: saved }); // as model.resumedFrom holds it
    assert.equal(resumed.taken, k);
    assert.deepEqual([...resumed], whole.slice(k), `after ${k}`);
  }
  const ds = new ArrayDataset(options);
  ds.next();
  const saved = ds.checkpointData();
  const fresh = () => new ArrayDataset(options);
  fresh().restore(null); // a fresh run: nothing to restore
  const edit = (f: Record<string, unknown>) => ({
    dataset: JSON.stringify({ ...JSON.parse(saved.dataset), ...f }),
  });
  assert.throws(
    () => new ArrayDataset({ ...options, seed: 5 }).restore(saved),
    /data\.dataset\.seed is 4, this dataset's is 5/,
  );
  assert.throws(
    () => new ArrayDataset({ ...options, batchSize: 4 }).restore(saved),
    /data\.dataset\.batchSize is 5, this dataset's is 4/,
  );
  assert.throws(() => fresh().restore({}), /the checkpoint's data has no "dataset"/);
  assert.throws(() => fresh().restore({ dataset: "{" }), /data\.dataset is not JSON/);
  assert.throws(
    () => fresh().restore(edit({ batch: 9 })),
    /data\.dataset\.batch must be in \[0, 4\], got 9/,
  );
  assert.throws(() => fresh().restore(edit({ epoch: -1 })), RangeError);
  const untouched = fresh();
  assert.throws(() => untouched.restore(edit({ epoch: 9 })));
  assert.deepEqual(untouched.position, { epoch: 0, batch: 0 }, "nothing changed");
});

Deno.test("ArrayDataset: bad options refused with the value and the rule", () => {
  const cases: [Partial<ArrayDatasetOptions>, RegExp][] = [
    [{ batchSize: 0 }, /batchSize must be a positive integer, got 0/],
    [{ epochs: 1.5 }, /epochs must be a positive integer/],
    [{ validationSplit: 1 }, /validationSplit must be in \[0, 1\), got 1/],
    [{ validationSplit: 0.01 }, /validationSplit 0\.01 of 23 examples holds out none/],
    [{ shape: [22, 2] }, /inputs holds 46 values, shape \[22, 2\] needs 44/],
    [{ targets: new Float32Array(24) }, /targets holds 24 values/],
    [{ inputs: [1, 2] as never }, /inputs must be a Float32Array/],
    [{ batchSize: 30, dropLast: true }, /23 training examples make no batch of 30 with dropLast/],
    [{ seed: 0.5 }, /seed must be a safe integer/],
  ];
  for (const [o, re] of cases) assert.throws(() => new ArrayDataset({ ...base, ...o }), re);
  assert.throws(() => new ArrayDataset(base).validation(), /no validationSplit/);
});

Deno.test("ArrayDataset in train: a checkpoint every 3 steps stores the position (ModelCheckpoint data), and a resumed run continues bit for bit", async () => {
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  const tokens = tok.encode(TINY_CORPUS);
  const n = 40, L = GPT.seqLen;
  const x = new Float32Array(n * L), y = new Float32Array(n * L);
  for (let i = 0; i < n; i++) {
    for (let t = 0; t < L; t++) {
      x[i * L + t] = tokens[3 * i + t];
      y[i * L + t] = tokens[3 * i + t + 1];
    }
  }
  const options = {
    inputs: x,
    shape: [n, L],
    targets: y,
    batchSize: 8,
    epochs: 2,
    seed: 3,
    validationSplit: 0.2,
  };
  const build = (resume?: string) =>
    cpuModel({
      schedule: "zb-h1",
      microBatches: 4,
      optimizer: { kind: "adamw", lr: 1e-2 },
      ...(resume ? { resume } : {}),
    });
  const whole = await (async () => {
    await using m = await build();
    const ds = new ArrayDataset(options);
    const r = await m.train(ds, { validation: { batch: ds.validation(), every: 4 } });
    return { losses: r.steps.map((s) => s.loss), bytes: await m.checkpointBytes() };
  })();
  assert.equal(whole.losses.length, 8);
  const dir = await Deno.makeTempDir();
  try {
    {
      await using m = await build();
      const ds = new ArrayDataset(options);
      await m.train(ds, {
        callbacks: [
          new ModelCheckpoint(m, {
            path: `${dir}/ck{step}`,
            every: 3,
            data: () => ds.checkpointData(),
          }),
        ],
      });
    }
    for (const at of [3, 6]) {
      await using m = await build(`${dir}/ck${at}`);
      const ds = new ArrayDataset(options);
      ds.restore(m.resumedFrom);
      assert.equal(ds.taken, at);
      const r = await m.train(ds);
      assert.deepEqual(r.steps.map((s) => s.loss), whole.losses.slice(at));
      assert.deepEqual(await m.checkpointBytes(), whole.bytes);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
