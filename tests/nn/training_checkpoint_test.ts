import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { Rng } from "../../src/tensor/random.ts";
import { CharTokenizer } from "../../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../../src/nn/gpt.ts";
import { sampleBatch } from "../../src/nn/sample_batch.ts";
import { crossEntropyLoss } from "../../src/nn/losses.ts";
import type { Sequential } from "../../src/nn/sequential.ts";
import { createOptimizer, type OptimizerSpec } from "../../src/nn/optimizer_spec.ts";
import type { OptimizerBase } from "../../src/nn/optimizer_base.ts";
import { encodeSafetensors, parseSafetensors, saveSafetensors } from "../../src/nn/safetensors.ts";
import {
  loadTrainingCheckpoint,
  parseTrainingCheckpoint,
  saveTrainingCheckpoint,
} from "../../src/nn/training_checkpoint.ts";

const be = new CpuBackend();
const tok = CharTokenizer.fromText(TINY_CORPUS);
const tokens = tok.encode(TINY_CORPUS);
const net = (seed: number): Sequential =>
  createTinyGPT({ vocabSize: tok.vocabSize, seqLen: 6, dim: 8, heads: 2, layers: 2, seed }, be);

/** `steps` single-device steps on batches drawn from `rng`. */
function train(model: Sequential, opt: OptimizerBase, rng: Rng, steps: number): void {
  for (let s = 0; s < steps; s++) {
    const b = sampleBatch(tokens, 4, 6, rng);
    const x = be.fromData(b.ids, b.shape), t = be.fromData(b.targets, b.shape);
    const y = model.forward(x);
    const r = crossEntropyLoss(y, t);
    model.backward(r.grad).dispose();
    opt.step();
    model.zeroGrad();
    for (const z of [x, t, y, r.loss, r.grad]) z.dispose();
  }
}

const SPECS: [string, OptimizerSpec][] = [
  ["AdamW, warmup-cosine", {
    kind: "adamw",
    lr: 1e-2,
    weightDecay: 0.01,
    lrSchedule: { kind: "warmup-cosine", warmupSteps: 2, decaySteps: 4, minLr: 1e-4 },
  }],
  ["SGD with momentum, step decay", {
    kind: "sgd",
    lr: 0.1,
    momentum: 0.9,
    lrSchedule: { kind: "step", stepSize: 2, gamma: 0.5 },
  }],
  ["SGD without momentum, constant", { kind: "sgd", lr: 0.1 }],
];

for (const [label, spec] of SPECS) {
  Deno.test(`single device (${label}): N steps, checkpoint, a new model and optimizer load it, M more steps: the same bytes as N + M steps`, async () => {
    const N = 3, M = 3;
    const a = net(1), optA = createOptimizer(spec, a.parameters());
    const rngA = new Rng(5);
    train(a, optA, rngA, N + M);
    const uninterrupted = await saveTrainingCheckpoint(a, optA, {
      data: { rng: JSON.stringify(rngA.state()) },
    });

    const b = net(1), optB = createOptimizer(spec, b.parameters());
    const rngB = new Rng(5);
    train(b, optB, rngB, N);
    const mid = await saveTrainingCheckpoint(b, optB, {
      data: { rng: JSON.stringify(rngB.state()) },
    });
    for (const x of [optB, b]) x.dispose();

    const c = net(99), optC = createOptimizer(spec, c.parameters());
    const info = loadTrainingCheckpoint(c, optC, mid);
    assert.equal(info.step, N);
    assert.equal(optC.stepCount, N);
    const rngC = Rng.fromState(JSON.parse(info.data.rng));
    train(c, optC, rngC, M);
    const resumed = await saveTrainingCheckpoint(c, optC, {
      data: { rng: JSON.stringify(rngC.state()) },
    });
    assert.deepEqual(
      resumed,
      uninterrupted,
      "the resumed run's checkpoint equals the uninterrupted run's, byte for byte",
    );
    for (const x of [optA, a, optC, c]) x.dispose();
  });
}

Deno.test("checkpoint layout: model.<name> then optim.<name>.<slot> (PyTorch's slot names), metadata with the format, step, full optimizer spec", async () => {
  const m = net(2);
  const opt = createOptimizer({ kind: "adamw", lr: 3e-3 }, m.parameters());
  train(m, opt, new Rng(1), 1);
  const file = parseSafetensors(await saveTrainingCheckpoint(m, opt));
  const names = m.parameters().map((p) => p.name);
  assert.deepEqual([...file.tensors.keys()], [
    ...names.map((n) => `model.${n}`),
    ...names.flatMap((n) => [`optim.${n}.exp_avg`, `optim.${n}.exp_avg_sq`]),
  ]);
  assert.deepEqual(file.metadata, {
    format: "conveyor-training-checkpoint",
    format_version: "1",
    step: "1",
    optimizer: JSON.stringify({
      kind: "adamw",
      lr: 3e-3,
      beta1: 0.9,
      beta2: 0.999,
      eps: 1e-8,
      weightDecay: 0.01,
    }),
  });
  // Weights equal the plain safetensors file's values.
  const plain = parseSafetensors(await saveSafetensors(m));
  for (const n of names) {
    assert.deepEqual(file.tensors.get(`model.${n}`)!.data, plain.tensors.get(n)!.data);
  }
  opt.setLearningRate(0.5);
  const withLr = parseSafetensors(await saveTrainingCheckpoint(m, opt, { data: { epoch: "2" } }));
  assert.equal(withLr.metadata.lr_override, "0.5");
  assert.equal(withLr.metadata.data, '{"epoch":"2"}');
  opt.dispose();
  m.dispose();
});

/** Re-encodes a checkpoint with `edit` applied to its tensors and metadata. */
function edited(
  bytes: Uint8Array,
  edit: (
    t: Map<string, { shape: number[]; data: Float32Array }>,
    meta: Record<string, string>,
  ) => void,
): Uint8Array {
  const f = parseSafetensors(bytes);
  const tensors = new Map([...f.tensors].map(([k, e]) => [k, { shape: e.shape, data: e.data }]));
  const meta = { ...f.metadata };
  edit(tensors, meta);
  return encodeSafetensors([...tensors].map(([name, e]) => ({ name, ...e })), { metadata: meta });
}

Deno.test("bad or mismatched checkpoints are refused naming the field or tensor and the rule; the model and optimizer stay unchanged", async () => {
  const src = net(3);
  const srcOpt = createOptimizer({ kind: "adamw", lr: 1e-2 }, src.parameters());
  train(src, srcOpt, new Rng(2), 2);
  const good = await saveTrainingCheckpoint(src, srcOpt);
  const first = src.parameters()[0].name;
  const corrupt = good.slice();
  corrupt[12] = 0xff; // inside the JSON header
  const cases: [string, Uint8Array, RegExp, OptimizerSpec?][] = [
    [
      "truncated",
      good.slice(0, good.length - 4),
      /checkpoint: not a valid safetensors file: .*truncated/,
    ],
    [
      "corrupted header",
      corrupt,
      /checkpoint: not a valid safetensors file: safetensors: header is not valid UTF-8 JSON/,
    ],
    [
      "weights only",
      await saveSafetensors(src),
      /__metadata__\.format must be "conveyor-training-checkpoint", got none \(a weights-only safetensors file loads with loadSafetensors\)/,
    ],
    [
      "future version",
      edited(good, (_, m) => void (m.format_version = "2")),
      /format_version "2" is not supported \(this version reads 1\)/,
    ],
    [
      "bad step",
      edited(good, (_, m) => void (m.step = "-1")),
      /__metadata__\.step must be an integer ≥ 0, got "-1"/,
    ],
    [
      "bad optimizer JSON",
      edited(good, (_, m) => void (m.optimizer = "{")),
      /__metadata__\.optimizer is not valid JSON/,
    ],
    [
      "bad optimizer",
      edited(good, (_, m) => void (m.optimizer = '{"kind":"adam"}')),
      /__metadata__\.optimizer: optimizer\.kind must be "adamw" or "sgd", got "adam"/,
    ],
    [
      "bad lr override",
      edited(good, (_, m) => void (m.lr_override = "-2")),
      /lr_override must be a finite number ≥ 0, got -2/,
    ],
    [
      "missing tensor",
      edited(good, (t) => void t.delete(`model.${first}`)),
      new RegExp(`optimizer state for ${first.replace(/\./g, "\\.")}, a parameter the file lacks`),
    ],
    [
      "missing weights and state",
      edited(good, (t) => {
        for (const k of [...t.keys()]) if (k.includes(first)) t.delete(k);
      }),
      new RegExp(`the file has no tensor model\\.${first.replace(/\./g, "\\.")} \\(shape`),
    ],
    [
      "missing slot",
      edited(good, (t) => void t.delete(`optim.${first}.exp_avg_sq`)),
      /tensor optim\..*\.exp_avg_sq is missing/,
    ],
    [
      "unknown slot",
      edited(good, (t) => void t.set(`optim.${first}.momentum_buffer`, t.get(`model.${first}`)!)),
      /adamw keeps state slots exp_avg, exp_avg_sq/,
    ],
    [
      "unknown tensor",
      edited(good, (t) => void t.set("extra", { shape: [1], data: new Float32Array(1) })),
      /tensor extra is neither model\.<parameter> nor optim\.<parameter>\.<slot>/,
    ],
    [
      "extra parameter",
      edited(good, (t) => void t.set("model.extra", { shape: [1], data: new Float32Array(1) })),
      /the file has tensor model\.extra, which the model lacks/,
    ],
    [
      "shape mismatch",
      edited(good, (t) => {
        const e = t.get(`model.${first}`)!;
        t.set(`model.${first}`, { shape: [e.data.length], data: e.data });
        for (const s of ["exp_avg", "exp_avg_sq"]) {
          t.set(`optim.${first}.${s}`, {
            shape: [e.data.length],
            data: t.get(`optim.${first}.${s}`)!.data,
          });
        }
      }),
      /has shape \[\d+\], the model needs \[\d+, \d+\]/,
    ],
    [
      "slot shape",
      edited(
        good,
        (t) => void t.set(`optim.${first}.exp_avg`, { shape: [1], data: new Float32Array(1) }),
      ),
      /must have the shape .* of model\./,
    ],
    [
      "state at step 0",
      edited(good, (_, m) => void (m.step = "0")),
      /a checkpoint at step 0 has no optimizer state/,
    ],
    [
      "optimizer kind",
      good,
      /its optimizer is adamw, the model's is sgd: the optimizer state cannot carry over/,
      { kind: "sgd", momentum: 0.9 },
    ],
  ];
  for (const [label, bytes, re, spec] of cases) {
    const target = net(4);
    const opt = createOptimizer(spec ?? { kind: "adamw", lr: 1e-2 }, target.parameters());
    train(target, opt, new Rng(8), 1);
    const before = await saveTrainingCheckpoint(target, opt);
    assert.throws(() => loadTrainingCheckpoint(target, opt, bytes), (e: unknown) => {
      assert.ok(e instanceof RangeError || e instanceof TypeError, `${label}: ${e}`);
      assert.match((e as Error).message, re, label);
      assert.match((e as Error).message, /^checkpoint: /, label);
      return true;
    });
    assert.deepEqual(
      await saveTrainingCheckpoint(target, opt),
      before,
      `${label}: nothing changed`,
    );
    opt.dispose();
    target.dispose();
  }
  // SGD with momentum cannot take a momentum-free state (nor the reverse).
  const plain = net(5), plainOpt = createOptimizer({ kind: "sgd", lr: 0.1 }, plain.parameters());
  train(plain, plainOpt, new Rng(3), 1);
  const noBuffers = await saveTrainingCheckpoint(plain, plainOpt);
  const withMomentum = createOptimizer({ kind: "sgd", lr: 0.1, momentum: 0.9 }, plain.parameters());
  assert.throws(
    () => loadTrainingCheckpoint(plain, withMomentum, noBuffers),
    /its sgd state has slots \[\], the model's optimizer keeps \[momentum_buffer\]/,
  );
  for (const x of [plainOpt, withMomentum, plain, srcOpt, src]) x.dispose();
});

Deno.test("parseTrainingCheckpoint gives the step, optimizer, data and state; a step-0 checkpoint loads into a trained optimizer and resets it", async () => {
  const m = net(6);
  const fresh = createOptimizer({ kind: "adamw" }, m.parameters());
  const zero = await saveTrainingCheckpoint(m, fresh, { data: { k: "v" } });
  const ck = parseTrainingCheckpoint(zero);
  assert.equal(ck.step, 0);
  assert.equal(ck.optimizerState.slots.size, 0);
  assert.deepEqual(ck.data, { k: "v" });
  train(m, fresh, new Rng(1), 2);
  assert.equal(fresh.stepCount, 2);
  loadTrainingCheckpoint(m, fresh, zero);
  assert.equal(fresh.stepCount, 0);
  assert.equal((await fresh.saveState()).slots.size, 0, "moments dropped");
  fresh.dispose();
  m.dispose();
});
