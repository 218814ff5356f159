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

Deno.test("checkpoint layout: model.<name> then optim.<name>.<slot> (PyTorch's slot names), metadata with the format, step counts, full optimizer spec", async () => {
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
    optimizer_step: "1",
    skipped_steps: "0",
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

/** A checkpoint of `net(7)` after 2 AdamW steps, its first parameter's name. */
async function trainedCheckpoint(): Promise<{ bytes: Uint8Array; first: string }> {
  const m = net(7);
  const opt = createOptimizer({ kind: "adamw", lr: 1e-2 }, m.parameters());
  train(m, opt, new Rng(4), 2);
  const bytes = await saveTrainingCheckpoint(m, opt);
  const first = m.parameters()[0].name;
  opt.dispose();
  m.dispose();
  return { bytes, first };
}

/** Loads `bytes` into a fresh trained model; asserts a refusal matching `re` that changes nothing. */
async function refusedLoad(bytes: Uint8Array, re: RegExp, label: string, allow = false) {
  const target = net(4);
  const opt = createOptimizer({ kind: "adamw", lr: 1e-2 }, target.parameters());
  train(target, opt, new Rng(8), 1);
  const before = await saveTrainingCheckpoint(target, opt);
  for (
    const call of [
      () => parseTrainingCheckpoint(bytes, { allowNonFinite: allow }),
      () => loadTrainingCheckpoint(target, opt, bytes, { allowNonFinite: allow }),
    ]
  ) {
    assert.throws(call, (e: unknown) => {
      assert.ok(e instanceof RangeError, `${label}: ${e}`);
      assert.match((e as Error).message, re, label);
      assert.match((e as Error).message, /^checkpoint: /, label);
      return true;
    });
  }
  assert.deepEqual(await saveTrainingCheckpoint(target, opt), before, `${label}: nothing changed`);
  opt.dispose();
  target.dispose();
}

/** `bytes` with the text `from` replaced in place by `to` (of the same length). */
function patch(bytes: Uint8Array, from: string, to: string): Uint8Array {
  assert.equal(from.length, to.length);
  const at = new TextDecoder().decode(bytes).indexOf(from);
  assert.ok(at > 0, `${from} is in the file`);
  const out = bytes.slice();
  out.set(new TextEncoder().encode(to), at);
  return out;
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

Deno.test("non-finite weights and optimizer state (NaN, ±Infinity) are refused by parseTrainingCheckpoint and loadTrainingCheckpoint, naming the tensor and the index, before anything changes; allowNonFinite loads them", async () => {
  const { bytes, first } = await trainedCheckpoint();
  const cases: [string, number, number][] = [
    [`model.${first}`, 5, NaN],
    [`model.${first}`, 0, Infinity],
    [`optim.${first}.exp_avg`, 3, -Infinity],
    [`optim.${first}.exp_avg_sq`, 2, NaN],
    [`optim.${first}.exp_avg_sq`, 1, Infinity],
  ];
  for (const [tensor, index, value] of cases) {
    const bad = edited(bytes, (t) => {
      const e = t.get(tensor)!;
      const data = e.data.slice();
      data[index] = value;
      t.set(tensor, { shape: e.shape, data });
    });
    await refusedLoad(
      bad,
      new RegExp(
        `tensor ${
          esc(tensor)
        } holds ${value} at index ${index}; .* must be finite \\(pass allowNonFinite`,
      ),
      `${tensor}[${index}] = ${value}`,
    );
    // Allowed: it loads as written.
    const m = net(4), opt = createOptimizer({ kind: "adamw", lr: 1e-2 }, m.parameters());
    loadTrainingCheckpoint(m, opt, bad, { allowNonFinite: true });
    const ck = parseTrainingCheckpoint(await saveTrainingCheckpoint(m, opt), {
      allowNonFinite: true,
    });
    const back = tensor.startsWith("model.")
      ? ck.weights.get(first)!.data
      : ck.optimizerState.slots.get(first)![tensor.endsWith("_sq") ? 1 : 0];
    assert.ok(Object.is(back[index], value), `${tensor}[${index}] loaded as ${back[index]}`);
    opt.dispose();
    m.dispose();
  }
});

Deno.test("a negative AdamW second moment (exp_avg_sq) is refused naming the tensor and the index, even with allowNonFinite, by the checkpoint readers and by AdamW.loadState itself", async () => {
  const { bytes, first } = await trainedCheckpoint();
  for (const value of [-0.5, -Infinity]) {
    const bad = edited(bytes, (t) => {
      const e = t.get(`optim.${first}.exp_avg_sq`)!;
      const data = e.data.slice();
      data[4] = value;
      t.set(`optim.${first}.exp_avg_sq`, { shape: e.shape, data });
    });
    const re = new RegExp(
      `tensor optim\\.${
        esc(first)
      }\\.exp_avg_sq holds ${value} at index 4; exp_avg_sq .* is never negative`,
    );
    await refusedLoad(bad, re, `exp_avg_sq = ${value}`);
    await refusedLoad(bad, re, `exp_avg_sq = ${value}, allowNonFinite`, true);
  }
  // The optimizer's own loader (OptimizerBase.loadState) applies the same rules.
  const good = parseTrainingCheckpoint(bytes).optimizerState;
  const m = net(4), opt = createOptimizer({ kind: "adamw", lr: 1e-2 }, m.parameters());
  const withValue = (value: number) => {
    const slots = new Map([...good.slots].map(([k, v]) => [k, v.map((d) => d.slice())]));
    slots.get(first)![1][4] = value;
    return { ...good, slots };
  };
  for (const allowNonFinite of [false, true]) {
    assert.throws(
      () => opt.loadState(withValue(-2), { allowNonFinite }),
      new RegExp(`AdamW: tensor ${esc(first)}\\.exp_avg_sq holds -2 at index 4; .* never negative`),
    );
  }
  assert.equal(opt.stepCount, 0, "refused: nothing loaded");
  assert.throws(() => opt.loadState(withValue(NaN)), /exp_avg_sq holds NaN at index 4; .* finite/);
  opt.loadState(withValue(NaN), { allowNonFinite: true });
  assert.equal(opt.stepCount, 2);
  opt.dispose();
  m.dispose();
});

Deno.test("step counts: a step edited from 2 to 9 is refused (it contradicts optimizer_step + skipped_steps), an edit no rule sees fails the header checksum; a file from before optimizer_step loads with optimizer_step = step", async () => {
  const { bytes } = await trainedCheckpoint();
  await refusedLoad(
    edited(bytes, (_, m) => void (m.step = "9")),
    /__metadata__\.step 9 contradicts the optimizer state: optimizer_step 2 \+ skipped_steps 0 = 2/,
    "step 9, re-encoded",
  );
  // Patched in place (the same length): the step counts disagree, whatever the checksum says.
  await refusedLoad(patch(bytes, '"step":"2"', '"step":"9"'), /step 9 contradicts/, "in place");
  // An edit no other rule sees (the optimizer's lr in its spec): the header checksum does.
  await refusedLoad(
    patch(bytes, '\\"lr\\":0.01', '\\"lr\\":0.02'),
    /safetensors: the header fails its checksum/,
    "lr patched in place",
  );
  await refusedLoad(
    edited(bytes, (_, m) => void (m.optimizer_step = "3")),
    /__metadata__\.step 2 contradicts the optimizer state: optimizer_step 3/,
    "optimizer_step 3",
  );
  await refusedLoad(
    edited(bytes, (_, m) => void delete m.skipped_steps),
    /__metadata__ has optimizer_step but not skipped_steps/,
    "skipped_steps missing",
  );
  await refusedLoad(
    edited(bytes, (_, m) => void (m.skipped_steps = "-1")),
    /__metadata__\.skipped_steps must be an integer ≥ 0, got "-1"/,
    "negative skipped steps",
  );
  // Written before the step counts and checksums existed: loads, optimizer_step = step.
  const old = edited(bytes, (_, m) => {
    delete m.optimizer_step;
    delete m.skipped_steps;
  });
  const ck = parseTrainingCheckpoint(old);
  assert.deepEqual([ck.step, ck.optimizerStep, ck.skippedSteps], [2, 2, 0]);
  // Steps skipped by a loop of one's own: step 5 of which 3 skipped.
  const m = net(7), opt = createOptimizer({ kind: "adamw", lr: 1e-2 }, m.parameters());
  train(m, opt, new Rng(4), 2);
  const skipped = parseTrainingCheckpoint(await saveTrainingCheckpoint(m, opt, { step: 5 }));
  assert.deepEqual([skipped.step, skipped.optimizerStep, skipped.skippedSteps], [5, 2, 3]);
  await assert.rejects(
    () => saveTrainingCheckpoint(m, opt, { step: 1 }),
    /step must be an integer ≥ the optimizer's step count 2/,
  );
  const m2 = net(8), opt2 = createOptimizer({ kind: "adamw", lr: 1e-2 }, m2.parameters());
  const info = loadTrainingCheckpoint(m2, opt2, await saveTrainingCheckpoint(m, opt, { step: 5 }));
  assert.deepEqual([info.step, info.optimizerStep, opt2.stepCount], [5, 2, 2]);
  for (const x of [opt, m, opt2, m2]) x.dispose();
});

Deno.test("a flipped bit in a training checkpoint's data section is refused naming the tensor it falls in (300 random flips), before anything changes", async () => {
  const { bytes } = await trainedCheckpoint();
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const dataStart = 8 + n;
  let x = 99;
  const rand = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const target = net(4);
  const opt = createOptimizer({ kind: "adamw", lr: 1e-2 }, target.parameters());
  const before = await saveTrainingCheckpoint(target, opt);
  for (let k = 0; k < 300; k++) {
    const at = Math.floor(rand() * (bytes.length - dataStart));
    const bad = bytes.slice();
    bad[dataStart + at] ^= 1 << Math.floor(rand() * 8);
    const name = Object.entries(header).find(([key, e]) =>
      key !== "__metadata__" &&
      at >= (e as { data_offsets: number[] }).data_offsets[0] &&
      at < (e as { data_offsets: number[] }).data_offsets[1]
    )![0];
    // A flip that makes a value non-finite or a second moment negative is named by that rule.
    assert.throws(
      () => loadTrainingCheckpoint(target, opt, bad),
      (e: Error) => {
        assert.match(
          e.message,
          new RegExp(
            `^checkpoint: (safetensors: tensor ${esc(name)} fails its checksum|tensor ${
              esc(name)
            } holds )`,
          ),
          `flip at data byte ${at}`,
        );
        return true;
      },
    );
  }
  assert.deepEqual(await saveTrainingCheckpoint(target, opt), before, "nothing changed");
  opt.dispose();
  target.dispose();
});
