import assert from "node:assert/strict";
import type { Backend, Shape, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import { Rng } from "../../src/tensor/random.ts";
import { CausalSelfAttention } from "../../src/nn/causal_self_attention.ts";
import { Embedding } from "../../src/nn/embedding.ts";
import { GELU } from "../../src/nn/gelu.ts";
import { createTinyGPT } from "../../src/nn/gpt.ts";
import type { Layer, LayerCost, LayerSpec } from "../../src/nn/layer.ts";
import { LayerBase } from "../../src/nn/layer_base.ts";
import { LayerNorm } from "../../src/nn/layer_norm.ts";
import { Linear } from "../../src/nn/linear.ts";
import { MLP } from "../../src/nn/mlp.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { Tanh } from "../../src/nn/tanh.ts";
import { SiLU } from "../../src/nn/silu.ts";
import { RMSNorm } from "../../src/nn/rms_norm.ts";
import { Dropout } from "../../src/nn/dropout.ts";
import { TokenPositionEmbedding } from "../../src/nn/token_position_embedding.ts";
import { TransformerBlock } from "../../src/nn/transformer_block.ts";
import { loadSafetensors, saveSafetensors } from "../../src/nn/safetensors.ts";
import { layerFromSpec, registeredLayerKinds, registerLayer } from "../../src/nn/layer_registry.ts";
import { NoSpec } from "./_no_spec_layer.ts";

const be = new CpuBackend();

function uniformInput(shape: Shape, seed: number): Tensor {
  const rng = new Rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return be.fromData(Float32Array.from({ length: n }, () => rng.next() * 2 - 1), shape);
}

function idsInput(shape: Shape, vocab: number, seed: number): Tensor {
  const rng = new Rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return be.fromData(Float32Array.from({ length: n }, () => rng.int(vocab)), shape);
}

interface Case {
  readonly name: string;
  readonly make: (be: Backend) => Layer;
  readonly input: () => Tensor;
}

// Every built-in layer, with options that differ from the defaults where a
// layer has them, so that a spec dropping an argument would be caught.
const CASES: readonly Case[] = [
  {
    name: "Linear",
    make: (b) => new Linear(b, 5, 3, { seed: 4 }),
    input: () => uniformInput([4, 5], 1),
  },
  {
    name: "Linear without bias",
    make: (b) => new Linear(b, 5, 3, { seed: 4, bias: false }),
    input: () => uniformInput([4, 5], 1),
  },
  { name: "ReLU", make: (b) => new ReLU(b), input: () => uniformInput([3, 4], 2) },
  { name: "GELU", make: (b) => new GELU(b), input: () => uniformInput([3, 4], 3) },
  { name: "Tanh", make: (b) => new Tanh(b), input: () => uniformInput([3, 4], 4) },
  { name: "SiLU", make: (b) => new SiLU(b), input: () => uniformInput([3, 4], 14) },
  {
    name: "RMSNorm (eps 1e-3)",
    make: (b) => new RMSNorm(b, 6, { eps: 1e-3 }),
    input: () => uniformInput([3, 6], 15),
  },
  {
    name: "Dropout (p 0.3, seed 9)",
    make: (b) => new Dropout(b, 0.3, { seed: 9 }),
    input: () => uniformInput([3, 6], 16),
  },
  {
    name: "LayerNorm (eps 1e-3)",
    make: (b) => new LayerNorm(b, 6, { eps: 1e-3 }),
    input: () => uniformInput([3, 6], 5),
  },
  {
    name: "Embedding",
    make: (b) => new Embedding(b, 7, 4, { seed: 2 }),
    input: () => idsInput([2, 3], 7, 6),
  },
  {
    name: "TokenPositionEmbedding",
    make: (b) => new TokenPositionEmbedding(b, 7, 5, 4, { seed: 2 }),
    input: () => idsInput([2, 5], 7, 7),
  },
  {
    name: "CausalSelfAttention",
    make: (b) => new CausalSelfAttention(b, 8, 2, { seed: 3 }),
    input: () => uniformInput([2, 3, 8], 8),
  },
  {
    name: "MLP (hidden 6)",
    make: (b) => new MLP(b, 4, { hidden: 6, seed: 3 }),
    input: () => uniformInput([3, 4], 9),
  },
  {
    name: "TransformerBlock (hidden 12)",
    make: (b) => new TransformerBlock(b, 8, 4, { hidden: 12, seed: 3 }),
    input: () => uniformInput([2, 3, 8], 10),
  },
  {
    name: "Sequential with names",
    make: (b) =>
      new Sequential([new Linear(b, 4, 6, { seed: 1 }), new Tanh(b), new Linear(b, 6, 2)], {
        names: ["in", "act", "out"],
      }),
    input: () => uniformInput([3, 4], 11),
  },
  {
    name: "Sequential nested in a Sequential",
    make: (b) =>
      new Sequential([
        new Sequential([new Linear(b, 4, 4, { seed: 5 }), new GELU(b)]),
        new LayerNorm(b, 4),
      ]),
    input: () => uniformInput([3, 4], 12),
  },
  {
    name: "tiny GPT",
    make: (b) =>
      createTinyGPT({ vocabSize: 9, seqLen: 4, dim: 8, heads: 2, layers: 2, seed: 5 }, b),
    input: () => idsInput([2, 4], 9, 13),
  },
];

for (const c of CASES) {
  Deno.test(`layerFromSpec: ${c.name} round-trips through JSON with identical outputs`, async () => {
    const original = c.make(be);
    const spec = original.spec!();
    const json = JSON.parse(JSON.stringify(spec)) as LayerSpec;
    assert.deepEqual(json, spec, "the spec is plain JSON");
    const copy = layerFromSpec(json, be);
    try {
      assert.equal(copy.kind, original.kind);
      assert.deepEqual(copy.spec!(), spec, "the rebuilt layer has the same spec");
      assert.deepEqual(
        copy.parameters().map((p) => [p.name, p.value.shape]),
        original.parameters().map((p) => [p.name, p.value.shape]),
      );
      loadSafetensors(copy, await saveSafetensors(original));
      const x = c.input();
      const y1 = original.forward(x, { save: false });
      const y2 = copy.forward(x, { save: false });
      assert.deepEqual(await y2.toArray(), await y1.toArray());
      for (const t of [x, y1, y2]) t.dispose();
    } finally {
      original.dispose();
      copy.dispose();
    }
  });
}

Deno.test("layerFromSpec: every built-in kind is registered", () => {
  const kinds = registeredLayerKinds();
  for (
    const k of [
      "Linear",
      "ReLU",
      "GELU",
      "Tanh",
      "LayerNorm",
      "Embedding",
      "TokenPositionEmbedding",
      "CausalSelfAttention",
      "MLP",
      "TransformerBlock",
      "Sequential",
    ]
  ) assert.ok(kinds.includes(k), k);
});

class Shift extends LayerBase {
  readonly kind = "TestShift";
  readonly by: number;
  constructor(backend: Backend, by: number) {
    super(backend);
    this.by = by;
  }
  override spec(): LayerSpec {
    return { kind: "TestShift", args: { by: this.by } };
  }
  protected outputShapeOf(s: Shape): Shape {
    return s;
  }
  protected costOf(s: Shape): LayerCost {
    return { params: 0, flops: s.reduce((a, b) => a * b, 1) };
  }
  protected forwardImpl(x: Tensor): { y: Tensor } {
    const ones = this.backend.zeros(x.shape);
    ops.fillInPlace(ones, this.by);
    const y = ops.add(x, ones);
    ones.dispose();
    return { y };
  }
  protected backwardInputImpl(dy: Tensor): Tensor {
    return ops.copy(dy);
  }
  protected backwardWeightImpl(): void {}
}

const shiftFactory = (args: Readonly<Record<string, unknown>>, b: Backend) =>
  new Shift(b, args.by as number);

Deno.test("registerLayer: a custom layer is rebuilt inside a Sequential", async () => {
  registerLayer("TestShift", shiftFactory);
  registerLayer("TestShift", shiftFactory); // same factory again: no-op
  const model = new Sequential([new Linear(be, 3, 3, { seed: 1 }), new Shift(be, 0.5)]);
  const copy = layerFromSpec(JSON.parse(JSON.stringify(model.spec())), be);
  loadSafetensors(copy, await saveSafetensors(model));
  const x = uniformInput([2, 3], 1);
  const a = model.forward(x, { save: false }), b = copy.forward(x, { save: false });
  assert.deepEqual(await b.toArray(), await a.toArray());
  assert.ok(registeredLayerKinds().includes("TestShift"));
  for (const t of [x, a, b]) t.dispose();
  model.dispose();
  copy.dispose();
});

Deno.test("registerLayer: refuses built-in kinds, taken kinds and bad arguments", () => {
  assert.throws(() => registerLayer("Linear", shiftFactory), /Linear is a built-in layer kind/);
  registerLayer("TestShift", shiftFactory);
  assert.throws(
    () => registerLayer("TestShift", (a, b) => shiftFactory(a, b)),
    /TestShift is already registered to another factory/,
  );
  assert.throws(() => registerLayer("", shiftFactory), TypeError);
  assert.throws(
    () => registerLayer("X", 3 as unknown as typeof shiftFactory),
    /factory for X must be a function/,
  );
});

Deno.test("layerFromSpec: unknown kinds and malformed specs are named", () => {
  assert.throws(
    () => layerFromSpec({ kind: "Conv2d", args: {} }, be),
    (e: Error) =>
      e instanceof RangeError && /unknown layer kind "Conv2d"/.test(e.message) &&
      /Linear/.test(e.message) && /registerLayer/.test(e.message) &&
      /modules option of PipelineParallelModel\.create/.test(e.message),
  );
  assert.throws(() => layerFromSpec(null as unknown as LayerSpec, be), TypeError);
  assert.throws(
    () => layerFromSpec({ kind: "Linear", args: { inFeatures: "4", outFeatures: 2 } }, be),
    /Linear\.args\.inFeatures must be a number, got "4"/,
  );
  assert.throws(
    () => layerFromSpec({ kind: "Linear", args: { inFeatures: 0, outFeatures: 2 } }, be),
    RangeError,
  );
  assert.throws(
    () => layerFromSpec({ kind: "Sequential", args: { layers: "no" } }, be),
    /Sequential\.args\.layers must be an array/,
  );
  assert.throws(
    () => layerFromSpec({ kind: "Linear", args: [] as unknown as Record<string, unknown> }, be),
    /Linear\.args must be an object/,
  );
});

Deno.test("layerFromSpec: a failing nested spec disposes what was already built", () => {
  const live = be.memory.liveBytes;
  assert.throws(
    () =>
      layerFromSpec({
        kind: "Sequential",
        args: {
          layers: [
            { kind: "Linear", args: { inFeatures: 4, outFeatures: 4 } },
            { kind: "Nope", args: {} },
          ],
        },
      }, be),
    /unknown layer kind "Nope"/,
  );
  assert.equal(be.memory.liveBytes, live, "no tensor left behind");
});

Deno.test("spec: a layer without one is named, alone and inside a Sequential", () => {
  const lone = new NoSpec(be);
  assert.throws(() => lone.spec(), /NoSpec: this layer has no spec\(\)/);
  const model = new Sequential([new Linear(be, 2, 2), lone], { names: ["a", "b"] });
  assert.throws(
    () => model.spec(),
    (e: Error) => e instanceof TypeError && /layer b: NoSpec/.test(e.message),
  );
  model.dispose();
});
