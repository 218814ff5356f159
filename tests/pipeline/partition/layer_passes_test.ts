import assert from "node:assert/strict";
import type { BackwardOptions, Layer, StateKey } from "../../../src/nn/layer.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { ReLU } from "../../../src/nn/relu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { createTinyGPT } from "../../../src/nn/gpt.ts";
import { profileLayerPasses } from "../../../src/pipeline/partition/layer_passes.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import type { Tensor } from "../../../src/tensor/mod.ts";

// Records the needInputGrad of every I and B it is asked for.
function spy(inner: Layer, seen: boolean[]): Layer {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === "backwardInput" || prop === "backward") {
        return (dy: Tensor, key?: StateKey, opts?: BackwardOptions) => {
          seen.push(opts?.needInputGrad ?? true);
          // deno-lint-ignore no-explicit-any
          return (target as any)[prop](dy, key, opts ?? {});
        };
      }
      const v = Reflect.get(target, prop);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

async function values(model: Sequential): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (const p of model.parameters()) {
    out.push(await p.value.toArray(), await p.grad.toArray());
  }
  return out;
}

Deno.test("profileLayerPasses: one timing per layer and pass, shapes and bytes, the model left as it was", async () => {
  const be = new CpuBackend();
  const model = new Sequential([
    new Linear(be, 6, 16, { seed: 1 }),
    new ReLU(be),
    new Linear(be, 16, 3, { seed: 2 }),
  ]);
  const x = be.fromData(new Float32Array(8 * 6).map((_, i) => (i % 7) / 7), [8, 6]);
  const t = be.fromData(new Float32Array([0, 1, 2, 0, 1, 2, 0, 1]), [8]);
  try {
    const before = await values(model);
    const live = be.memory.liveBytes;
    const p = await profileLayerPasses(model, x, {
      repeats: 3,
      warmup: 1,
      targets: t,
      optimizer: { kind: "adamw", lr: 0.1, weightDecay: 0.1 },
    });
    assert.equal(p.rows, 8);
    assert.equal(p.backend, "cpu");
    assert.deepEqual(p.layers.map((l) => l.kind), ["Linear", "ReLU", "Linear"]);
    assert.deepEqual(p.layers.map((l) => l.inputShape), [[8, 6], [8, 16], [8, 16]]);
    assert.deepEqual(p.layers.map((l) => l.outputShape), [[8, 16], [8, 16], [8, 3]]);
    assert.deepEqual(p.layers.map((l) => l.params), [6 * 16 + 16, 0, 16 * 3 + 3]);
    assert.deepEqual(p.layers.map((l) => l.paramBytes), [4 * 112, 0, 4 * 51]);
    for (const l of p.layers) {
      for (const pass of [l.F, l.I, l.W]) {
        assert.ok(pass.min >= 0 && pass.min <= pass.median && pass.median <= pass.max);
      }
    }
    // AdamW: two moments per parameter; the step check copies parameters and moments.
    assert.equal(p.layers[0].optimizerStateBytes, 2 * 4 * 112);
    assert.equal(p.layers[0].stepCopyBytes, 3 * 4 * 112);
    assert.equal(p.layers[1].step, undefined);
    assert.ok(p.layers[2].step!.median >= 0);
    assert.ok(p.loss !== undefined && p.loss.median >= 0);
    assert.equal(p.totals.length, 3);
    assert.ok(p.spread >= 0);
    // Each total is the sum of that sweep's passes and loss: at least the sum of the minima.
    const floor = p.layers.reduce((a, l) => a + l.F.min + l.I.min + l.W.min, p.loss!.min);
    assert.ok(p.totals.every((v) => v >= floor - 1e-9));
    // Weights, gradients (even after AdamW with weight decay) and memory as before.
    assert.deepEqual(await values(model), before);
    assert.equal(be.memory.liveBytes, live);
    assert.deepEqual(model.heldKeys(), []);
  } finally {
    x.dispose();
    t.dispose();
    model.dispose();
  }
});

Deno.test("profileLayerPasses: the first layer's I skips its input gradient, as stage 0 does", async () => {
  const be = new CpuBackend();
  const seen0: boolean[] = [];
  const seen1: boolean[] = [];
  const a = new Linear(be, 4, 4, { seed: 1 });
  const b = new Linear(be, 4, 4, { seed: 2 });
  const x = be.zeros([2, 4]);
  try {
    await profileLayerPasses([spy(a, seen0), spy(b, seen1)], x, { repeats: 2, warmup: 1 });
    assert.deepEqual(seen0, [false, false, false]); // 1 warm-up + 2 timed sweeps
    assert.deepEqual(seen1, [true, true, true]);
  } finally {
    x.dispose();
    a.dispose();
    b.dispose();
  }
});

Deno.test("profileLayerPasses: a tiny GPT with its loss on sequences of tokens", async () => {
  const be = new CpuBackend();
  const gpt = createTinyGPT({ vocabSize: 11, seqLen: 8, dim: 8, heads: 2, layers: 2, seed: 1 }, be);
  const x = be.fromData(new Float32Array(2 * 8).map((_, i) => i % 11), [2, 8]);
  const t = be.fromData(new Float32Array(2 * 8).map((_, i) => (i + 1) % 11), [2, 8]);
  try {
    const p = await profileLayerPasses(gpt, x, {
      repeats: 1,
      warmup: 0,
      targets: t,
      totalRows: 64,
    });
    assert.equal(p.layers.length, gpt.layers.length);
    assert.deepEqual(p.layers[p.layers.length - 1].outputShape, [2, 8, 11]);
  } finally {
    x.dispose();
    t.dispose();
    gpt.dispose();
  }
});

Deno.test("profileLayerPasses: minTimeMs sweeps past repeats, up to 20 × repeats", async () => {
  const be = new CpuBackend();
  const m = new Sequential([new Linear(be, 4, 4, { seed: 1 })]);
  const x = be.zeros([2, 4]);
  try {
    const few = await profileLayerPasses(m, x, { repeats: 2, warmup: 0 });
    assert.equal(few.totals.length, 2);
    // A tiny layer's sweeps take far less than a minute: the cap stops them.
    const capped = await profileLayerPasses(m, x, { repeats: 2, warmup: 0, minTimeMs: 60_000 });
    assert.equal(capped.totals.length, 40);
    assert.ok(capped.layers.every((l) => l.F.max >= l.F.min));
    await assert.rejects(() => profileLayerPasses(m, x, { minTimeMs: -1 }), /minTimeMs must be/);
  } finally {
    x.dispose();
    m.dispose();
  }
});

Deno.test("profileLayerPasses: bad options are refused before any work", async () => {
  const be = new CpuBackend();
  const m = new Sequential([new Linear(be, 4, 2)]);
  const x = be.zeros([2, 4]);
  const wrong = be.zeros([2, 5]);
  try {
    await assert.rejects(
      () => profileLayerPasses(m, x, { repeats: 0 }),
      /repeats must be an integer >= 1, got 0/,
    );
    await assert.rejects(
      () => profileLayerPasses(m, x, { warmup: -1 }),
      /warmup must be an integer >= 0/,
    );
    await assert.rejects(() => profileLayerPasses(m, x, { loss: "l2" as "mse" }), /got "l2"/);
    await assert.rejects(
      () => profileLayerPasses(m, x, { optimizer: { kind: "rmsprop" } as never }),
      /optimizer/,
    );
    await assert.rejects(() => profileLayerPasses(m, wrong), /inFeatures = 4/);
    await assert.rejects(() => profileLayerPasses("model" as never, x), /Sequential or an array/);
  } finally {
    x.dispose();
    wrong.dispose();
    m.dispose();
  }
});
