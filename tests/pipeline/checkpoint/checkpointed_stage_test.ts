import assert from "node:assert/strict";
import { GELU } from "../../../src/nn/gelu.ts";
import type { Layer, StateKey } from "../../../src/nn/layer.ts";
import { LayerNorm } from "../../../src/nn/layer_norm.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { MLP } from "../../../src/nn/mlp.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Tanh } from "../../../src/nn/tanh.ts";
import { TokenPositionEmbedding } from "../../../src/nn/token_position_embedding.ts";
import { TransformerBlock } from "../../../src/nn/transformer_block.ts";
import {
  ActivationCheckpointConfig,
  type ActivationCheckpointOptions,
} from "../../../src/pipeline/checkpoint/checkpoint.ts";
import { CheckpointedStage } from "../../../src/pipeline/checkpoint/checkpointed_stage.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import { randomTensor, Rng } from "../../../src/tensor/random.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";

const B = 2, T = 6, D = 16, VOCAB = 23;

/** Embedding, blocks and a mix of small layers: every kind of state the layers keep. */
function buildModel(be: CpuBackend): Sequential {
  const rng = new Rng(42);
  return new Sequential([
    new TokenPositionEmbedding(be, VOCAB, T, D, { rng }),
    new TransformerBlock(be, D, 4, { rng }),
    new LayerNorm(be, D),
    new Linear(be, D, 24, { rng }),
    new GELU(be),
    new Linear(be, 24, D, { rng }),
    new Tanh(be),
    new TransformerBlock(be, D, 2, { rng }),
    new MLP(be, D, { rng }),
    new LayerNorm(be, D),
    new Linear(be, D, VOCAB, { rng }),
  ]);
}

function ids(be: CpuBackend, seed: number): Tensor {
  const r = new Rng(seed);
  return be.fromData(
    Float32Array.from({ length: B * T }, () => Math.floor(r.next() * VOCAB)),
    [B, T],
  );
}

type Step =
  | { op: "F"; mb: number }
  | { op: "B"; mb: number } // fused B+W
  | { op: "I"; mb: number } // B only
  | { op: "W"; mb: number };

/**
 * Runs a sequence of passes over several micro-batches and returns every
 * output, every input gradient and the final parameter gradients, as
 * arrays. `layer` is either the plain model or a stage wrapping it.
 */
async function runSteps(
  be: CpuBackend,
  layer: Layer,
  steps: readonly Step[],
  input: (mb: number) => Tensor,
): Promise<{ outs: Float32Array[]; dxs: Float32Array[]; grads: Float32Array[] }> {
  const inputs = new Map<number, Tensor>();
  const outs: Float32Array[] = [];
  const dxs: Float32Array[] = [];
  const key = (mb: number): StateKey => `mb${mb}`;
  for (const s of steps) {
    if (s.op === "F") {
      const x = input(s.mb);
      inputs.set(s.mb, x);
      const y = layer.forward(x, { key: key(s.mb) });
      outs.push(await y.toArray());
      y.dispose();
    } else if (s.op === "W") {
      layer.backwardWeight(key(s.mb));
    } else {
      const dy = randomTensor(be, [B, T, VOCAB], new Rng(200 + s.mb));
      const dx = s.op === "B" ? layer.backward(dy, key(s.mb)) : layer.backwardInput(dy, key(s.mb));
      dxs.push(await dx.toArray());
      dx.dispose();
      dy.dispose();
    }
  }
  for (const x of inputs.values()) x.dispose();
  const grads = await Promise.all(layer.parameters().map((p) => p.grad.toArray()));
  return { outs, dxs, grads };
}

const F = (mb: number): Step => ({ op: "F", mb });
const BW = (mb: number): Step => ({ op: "B", mb });
const I = (mb: number): Step => ({ op: "I", mb });
const W = (mb: number): Step => ({ op: "W", mb });

// 1F1B-like with fused backward, and a zero-bubble-like order with B/W split
// where micro-batches interleave: recompute must use its own key's checkpoints.
const SCHEDULES: [string, Step[]][] = [
  ["fused", [F(0), F(1), BW(0), F(2), BW(1), BW(2)]],
  ["split", [F(0), F(1), F(2), I(1), I(0), W(1), F(3), I(3), I(2), W(0), W(3), W(2)]],
];

const CONFIGS: ActivationCheckpointOptions[] = [
  { enabled: false },
  { recompute: "full", everyNLayers: 1 },
  { recompute: "full", everyNLayers: 2 },
  { recompute: "full", everyNLayers: 3 },
  { recompute: "full", everyNLayers: 11 },
  { recompute: "full", everyNLayers: 4, checkpointFirstLayer: false },
  { recompute: "selective", everyNLayers: 1 },
  { recompute: "selective", everyNLayers: 4 },
  { recompute: "selective", everyNLayers: 20, checkpointFirstLayer: false },
];

Deno.test("gradients are bitwise identical with and without checkpointing, every strategy", async () => {
  const be = new CpuBackend();
  const model = buildModel(be);
  // The whole model (token ids in, so dx is zeros) and its tail (real dx).
  const variants: [string, readonly Layer[], (mb: number) => Tensor][] = [
    ["model", model.layers, (mb) => ids(be, 100 + mb)],
    ["tail", model.layers.slice(1), (mb) => randomTensor(be, [B, T, D], new Rng(100 + mb))],
  ];
  try {
    for (const [variant, layers, input] of variants) {
      const plain = new Sequential(layers);
      for (const [name, steps] of SCHEDULES) {
        model.zeroGrad();
        const ref = await runSteps(be, plain, steps, input);
        const live = be.memory.liveBytes;
        for (const cfg of CONFIGS) {
          model.zeroGrad();
          // The stage wraps the same layers; it must not dispose them here.
          const stage = new CheckpointedStage(layers, cfg);
          const got = await runSteps(be, stage, steps, input);
          const what = `${variant} ${name} ${JSON.stringify(cfg)}`;
          assert.deepEqual(got.outs, ref.outs, `outputs ${what}`);
          assert.deepEqual(got.dxs, ref.dxs, `input gradients ${what}`);
          assert.equal(got.grads.length, ref.grads.length);
          got.grads.forEach((g, i) => assert.deepEqual(g, ref.grads[i], `grad ${i} ${what}`));
          assert.deepEqual(stage.heldKeys(), [], what);
          for (const l of layers) assert.deepEqual(l.heldKeys(), [], `${l.kind} ${what}`);
          assert.equal(be.memory.liveBytes, live, `no tensor left behind: ${what}`);
        }
      }
      // The plans really differ: some configs recompute, some do not.
      assert.ok(new CheckpointedStage(layers, CONFIGS[2]).plan.segments.length > 0);
    }
    // The tail's input gradients are not trivially zero.
    model.zeroGrad();
    const tail = await runSteps(
      be,
      new Sequential(model.layers.slice(1)),
      [F(0), BW(0)],
      variants[1][2],
    );
    assert.ok(tail.dxs[0].some((v) => v !== 0));
  } finally {
    model.dispose();
  }
});

/** Peak bytes above the live bytes at the start, over one forward + fused backward. */
function peakActivationBytes(
  be: CpuBackend,
  layers: readonly Layer[],
  cfg: ActivationCheckpointOptions,
  x: Tensor,
  dyOf: (y: Tensor) => Tensor,
): number {
  const stage = new CheckpointedStage(layers, cfg);
  const base = be.memory.liveBytes;
  be.memory.resetPeak();
  const y = stage.forward(x, { key: "mb0" });
  const dy = dyOf(y);
  y.dispose();
  const dx = stage.backward(dy, "mb0");
  dy.dispose();
  dx.dispose();
  const peak = be.memory.peakBytes - base;
  assert.equal(be.memory.liveBytes, base);
  return peak;
}

Deno.test("64-layer stack: checkpointing every 8 layers holds at most 25% of the activation bytes", () => {
  const be = new CpuBackend();
  const rng = new Rng(7);
  const layers = Array.from({ length: 64 }, () => new TransformerBlock(be, 16, 2, { rng }));
  const x = randomTensor(be, [2, 8, 16], new Rng(1));
  const dyOf = (y: Tensor) => randomTensor(be, y.shape, new Rng(2));
  try {
    const none = peakActivationBytes(be, layers, { enabled: false }, x, dyOf);
    const every8 = peakActivationBytes(be, layers, { enabled: true, everyNLayers: 8 }, x, dyOf);
    // Without checkpointing every block keeps dozens of activation-sized tensors.
    assert.ok(none > 64 * x.bytes, `no checkpointing: ${none} bytes`);
    assert.ok(every8 <= 0.25 * none, `every 8: ${every8} bytes vs ${none} (${every8 / none})`);
  } finally {
    for (const l of layers) l.dispose();
    x.dispose();
  }
});

Deno.test("single-tensor layers: memory follows (L/k + k) activations, not L", () => {
  const be = new CpuBackend();
  const width = 32;
  const layers: Layer[] = Array.from(
    { length: 64 },
    (_, i) => i % 2 === 0 ? new Linear(be, width, width, { seed: i }) : new GELU(be),
  );
  const x = randomTensor(be, [128, width], new Rng(3));
  const unit = x.bytes;
  const dyOf = (y: Tensor) => randomTensor(be, y.shape, new Rng(4));
  try {
    const none = peakActivationBytes(be, layers, {}, x, dyOf) / unit;
    const every8 = peakActivationBytes(be, layers, { enabled: true, everyNLayers: 8 }, x, dyOf) /
      unit;
    // 64 saved inputs plus a few transients, against 8 checkpoints + 8 recomputed + transients.
    assert.ok(none >= 64 && none <= 68, `no checkpointing: ${none} activations`);
    assert.ok(every8 >= 15 && every8 <= 19, `every 8: ${every8} activations`);
  } finally {
    for (const l of layers) l.dispose();
    x.dispose();
  }
});

Deno.test("selective keeps expensive layers: fewer recomputed, memory between none and full", () => {
  const be = new CpuBackend();
  const rng = new Rng(9);
  const layers: Layer[] = Array.from(
    { length: 48 },
    (_, i) => [new LayerNorm(be, 32), new Linear(be, 32, 32, { rng }), new GELU(be)][i % 3],
  );
  const x = randomTensor(be, [128, 32], new Rng(5));
  const dyOf = (y: Tensor) => randomTensor(be, y.shape, new Rng(6));
  try {
    const none = peakActivationBytes(be, layers, {}, x, dyOf);
    const sel = peakActivationBytes(
      be,
      layers,
      { recompute: "selective", everyNLayers: 6 },
      x,
      dyOf,
    );
    const full = peakActivationBytes(be, layers, { recompute: "full", everyNLayers: 6 }, x, dyOf);
    assert.ok(full < sel && sel < none, `full ${full} < selective ${sel} < none ${none}`);
    const plan = new CheckpointedStage(layers, { recompute: "selective", everyNLayers: 6 }).plan;
    assert.equal(plan.keep.filter((k) => !k).length, 32); // LayerNorm and GELU
  } finally {
    for (const l of layers) l.dispose();
    x.dispose();
  }
});

Deno.test("maxActivationsInMemory refuses a forward beyond the cap, changing nothing", () => {
  const be = new CpuBackend();
  const stage = new CheckpointedStage(
    [new Linear(be, 4, 4, { seed: 1 }), new GELU(be)],
    new ActivationCheckpointConfig({ enabled: true, maxActivationsInMemory: 2 }),
  );
  const x = be.zeros([3, 4]);
  try {
    stage.forward(x, { key: "mb0" }).dispose();
    stage.forward(x, { key: "mb1" }).dispose();
    const live = be.memory.liveBytes;
    assert.throws(
      () => stage.forward(x, { key: "mb2" }),
      (e: Error) =>
        e instanceof RangeError &&
        e.message ===
          'CheckpointedStage: maxActivationsInMemory = 2 reached: holding keys "mb0", "mb1"; forward of key "mb2" refused',
    );
    assert.equal(be.memory.liveBytes, live);
    assert.deepEqual(stage.heldKeys(), ["mb0", "mb1"]);
    // Inference (save: false) is not counted.
    stage.forward(x, { save: false }).dispose();
    // Once one micro-batch is done, the next may start.
    stage.dropState("mb0");
    stage.forward(x, { key: "mb2" }).dispose();
    assert.deepEqual(stage.heldKeys(), ["mb1", "mb2"]);
  } finally {
    x.dispose();
    stage.dispose();
  }
  assert.equal(be.memory.liveBytes, 0);
});

Deno.test("misuse errors name the key and shapes", () => {
  const be = new CpuBackend();
  const stage = new CheckpointedStage([new Linear(be, 4, 3, { seed: 1 }), new Tanh(be)], {
    enabled: true,
  });
  const x = be.zeros([2, 4]);
  try {
    assert.throws(
      () => stage.backwardInput(be.zeros([2, 3]), "mb9"),
      /backwardInput for key "mb9" without a saved forward/,
    );
    stage.forward(x, { key: 1 }).dispose();
    assert.throws(() => stage.forward(x, { key: 1 }), /state for key 1 is still held/);
    assert.throws(() => stage.backwardWeight(1), /backwardWeight for key 1 must follow/);
    const bad = be.zeros([2, 4]);
    assert.throws(
      () => stage.backwardInput(bad, 1),
      (e: Error) =>
        e instanceof RangeError &&
        /dy shape \[2, 4\] must equal the forward output shape \[2, 3\] \(key 1\)/.test(e.message),
    );
    bad.dispose();
    assert.throws(
      () => stage.forward(be.zeros([2, 5]), { key: 2 }),
      (e: Error) => e instanceof RangeError && /\[2, 5\]/.test(e.message),
    );
    assert.deepEqual(stage.heldKeys(), [1]);
    assert.throws(
      () =>
        new CheckpointedStage([new GELU(be)], { everyNLayers: 0 } as ActivationCheckpointOptions),
      /everyNLayers must be an integer >= 1, got 0/,
    );
  } finally {
    x.dispose();
    stage.dispose();
  }
});

Deno.test("needInputGrad false: null from B and fused B+W, gradients bitwise identical, every strategy", async () => {
  for (const cfg of [CONFIGS[0], CONFIGS[1], CONFIGS[3], CONFIGS[6]]) {
    for (const fused of [false, true]) {
      const run = async (need: boolean) => {
        const be = new CpuBackend();
        const stage = new CheckpointedStage(buildModel(be), cfg);
        const base = be.memory.liveBytes;
        let dxSeen: Tensor | null = null;
        for (const mb of [0, 1]) {
          const x = ids(be, 100 + mb);
          stage.forward(x, { key: mb }).dispose();
          x.dispose();
        }
        for (const mb of [1, 0]) {
          const dy = randomTensor(be, [B, T, VOCAB], new Rng(200 + mb));
          const opts = { needInputGrad: need };
          const dx = fused ? stage.backward(dy, mb, opts) : stage.backwardInput(dy, mb, opts);
          dy.dispose();
          if (!fused) stage.backwardWeight(mb);
          if (dx !== null) {
            dxSeen = dx;
            dx.dispose();
          }
        }
        const grads = await Promise.all(stage.parameters().map((p) => p.grad.toArray()));
        const leaked = be.memory.liveBytes - base;
        assert.deepEqual(stage.heldKeys(), []);
        stage.dispose();
        return { dxSeen, grads, leaked };
      };
      const full = await run(true), skipped = await run(false);
      const w = `${JSON.stringify(cfg)} ${fused ? "fused" : "split"}`;
      assert.notEqual(full.dxSeen, null, `${w}: dx when asked`);
      assert.equal(skipped.dxSeen, null, `${w}: null with needInputGrad false`);
      assert.deepEqual(skipped.grads, full.grads, `${w}: identical gradients`);
      assert.equal(skipped.leaked, full.leaked, `${w}: nothing left behind`);
    }
  }
});
