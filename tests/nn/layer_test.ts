import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { DEFAULT_KEY, type Layer } from "../../src/nn/layer.ts";
import { Embedding } from "../../src/nn/embedding.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { TokenPositionEmbedding } from "../../src/nn/token_position_embedding.ts";
import { Rng } from "../../src/tensor/random.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Tanh } from "../../src/nn/tanh.ts";
import { TransformerBlock } from "../../src/nn/transformer_block.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { gradCheck, ids, uniform } from "./_layer_checks.ts";

// A layer whose B forgets the (1 − y²) factor: the finite-difference check must catch it.
class WrongTanh extends Tanh {
  protected override backwardInputImpl(dy: Tensor, state: { y?: Tensor }): Tensor {
    state.y?.dispose();
    delete state.y;
    return dy.reshape(dy.shape);
  }
}

Deno.test("gradCheck (the harness) fails on a wrong backward", async () => {
  const input = (be: Backend, seed: number) => uniform(be, [2, 3], seed, -2, 2);
  await assert.rejects(() => gradCheck((be) => new WrongTanh(be), input), /Tanh dx\[/);
  // ... and passes on the right one.
  await gradCheck((be) => new Tanh(be), input);
});

Deno.test("Layer contract: keys, F → B → W order, and errors naming the key", () => {
  const be = new CpuBackend();
  const l = new Linear(be, 3, 2, { seed: 1 });
  const x = uniform(be, [4, 3], 1);
  const y = l.forward(x, { key: "mb0/c1" });
  assertThrowsWith(() => l.forward(x, { key: "mb0/c1" }), Error, ['"mb0/c1"', "still held"]);
  assertThrowsWith(() => l.backwardWeight("mb0/c1"), Error, ["must follow its backwardInput"]);
  assertThrowsWith(() => l.backwardInput(y, "mb1"), Error, ['"mb1"', "without a saved forward"]);
  const bad = be.zeros([4, 3]);
  assertThrowsWith(() => l.backwardInput(bad, "mb0/c1"), RangeError, ["[4, 3]", "[4, 2]"]);
  const dx = l.backwardInput(y, "mb0/c1");
  assertThrowsWith(() => l.backwardInput(y, "mb0/c1"), Error, ["already ran"]);
  // Numbers and strings are distinct keys; the default key is 0.
  const y0 = l.forward(x);
  assert.deepEqual(new Set(l.heldKeys()), new Set(["mb0/c1", DEFAULT_KEY]));
  const y0s = l.forward(x, { key: "0" });
  assert.equal(l.heldKeys().length, 3);
  l.backwardWeight("mb0/c1");
  l.dropState(0);
  l.dropState("0");
  l.dropState("never-used"); // no-op
  assertThrowsWith(() => l.forward(x, { key: {} as string }), TypeError, ["key must be a string"]);
  assert.deepEqual(l.heldKeys(), []);
  for (const t of [x, y, bad, dx, y0, y0s]) t.dispose();
  l.dispose();
  assertThrowsWith(() => l.forward(x), TypeError, ["after dispose"]);
});

Deno.test("Layer contract: inputs from another backend instance or disposed are refused", () => {
  const a = new CpuBackend(), b = new CpuBackend();
  const l = new Linear(a, 2, 2);
  const xb = b.zeros([1, 2]);
  assertThrowsWith(() => l.forward(xb), TypeError, ["another", "backend"]);
  const xa = a.zeros([1, 2]);
  xa.dispose();
  assertThrowsWith(() => l.forward(xa), TypeError, ["disposed"]);
  l.dispose();
});

Deno.test("Layer contract: the caller may dispose x and dy at once; F/B/W, dropState and save:false leak nothing", () => {
  const be = new CpuBackend();
  const block = new TransformerBlock(be, 8, 2, { seed: 1 });
  const base = be.memory.liveBytes;
  const run = (key: string) => {
    const x = uniform(be, [2, 5, 8], 3);
    const y = block.forward(x, { key });
    x.dispose(); // the block keeps its own handle
    return y;
  };
  // Two micro-batches in flight, B of both, then W of both.
  const y0 = run("a"), y1 = run("b");
  const dx0 = block.backwardInput(y0, "a");
  const dx1 = block.backwardInput(y1, "b");
  for (const t of [y0, y1, dx0, dx1]) t.dispose();
  assert.ok(be.memory.liveBytes > base, "what W needs is still kept after B");
  block.backwardWeight("a");
  block.backwardWeight("b");
  assert.equal(be.memory.liveBytes, base, "after W nothing is kept");
  // A forward dropped before backward (e.g. an aborted step).
  const y2 = run("c");
  y2.dispose();
  block.dropState("c");
  assert.equal(be.memory.liveBytes, base, "dropState frees everything");
  // save: false keeps nothing.
  const x = uniform(be, [2, 5, 8], 4);
  const y3 = block.forward(x, { save: false });
  assert.deepEqual(block.heldKeys(), []);
  x.dispose();
  y3.dispose();
  assert.equal(be.memory.liveBytes, base);
  block.dispose();
  assert.equal(be.memory.liveBytes, 0, "dispose frees the parameters and gradients");
});

Deno.test("Layer contract: zeroGrad clears what W accumulated; W adds up over micro-batches", async () => {
  const be = new CpuBackend();
  const l = new Linear(be, 2, 1, { seed: 2 });
  const x = be.fromData(new Float32Array([1, 2]), [1, 2]);
  const dy = be.fromData(new Float32Array([1]), [1, 1]);
  for (const key of [0, 1]) {
    const y = l.forward(x, { key });
    l.backward(dy, key).dispose();
    y.dispose();
  }
  assert.deepEqual([...await l.parameters()[0].grad.toArray()], [2, 4]);
  l.zeroGrad();
  for (const p of l.parameters()) assert.ok((await p.grad.toArray()).every((v) => v === 0));
  l.dispose();
});

/**
 * Runs F, then B (or fused B+W) with `needInputGrad` as given, then W, on a
 * fresh layer; returns what B returned (read, then disposed), the gradients,
 * and the live bytes left beyond the parameters.
 */
async function runNeed(
  make: (be: Backend) => Layer,
  input: (be: Backend) => Tensor,
  need: boolean | undefined,
  fused: boolean,
): Promise<{ dx: Float32Array | null; grads: Float32Array[]; leaked: number }> {
  const be = new CpuBackend();
  const layer = make(be);
  const base = be.memory.liveBytes;
  const x = input(be);
  const y = layer.forward(x, { key: "mb0" });
  x.dispose();
  const dy = uniform(be, [...y.shape], 9);
  y.dispose();
  const opts = need === undefined ? {} : { needInputGrad: need };
  const dx = fused ? layer.backward(dy, "mb0", opts) : layer.backwardInput(dy, "mb0", opts);
  dy.dispose();
  if (!fused) layer.backwardWeight("mb0");
  const dxa = dx === null ? null : await dx.toArray();
  dx?.dispose();
  const grads = await Promise.all(layer.parameters().map((p) => p.grad.toArray()));
  const leaked = be.memory.liveBytes - base;
  layer.dispose();
  return { dx: dxa, grads, leaked };
}

Deno.test("Layer contract: needInputGrad false returns null and leaves every weight gradient identical", async () => {
  const tokens = (be: Backend) => ids(be, [2, 5], 11, 3);
  const feats = (be: Backend) => uniform(be, [2, 5, 6], 4);
  const cases: [string, (be: Backend) => Layer, (be: Backend) => Tensor][] = [
    ["Linear", (be) => new Linear(be, 6, 4, { seed: 1 }), feats],
    ["Embedding", (be) => new Embedding(be, 11, 6, { seed: 1 }), tokens],
    [
      "TokenPositionEmbedding",
      (be) => new TokenPositionEmbedding(be, 11, 5, 6, { seed: 1 }),
      tokens,
    ],
    ["Tanh (LayerBase default)", (be) => new Tanh(be), feats],
    [
      "TransformerBlock (LayerBase default)",
      (be) => new TransformerBlock(be, 6, 2, { seed: 1 }),
      feats,
    ],
    [
      "Sequential from tokens",
      (be) => {
        const rng = new Rng(5);
        return new Sequential([
          new TokenPositionEmbedding(be, 11, 5, 6, { rng }),
          new Tanh(be),
          new Linear(be, 6, 3, { rng }),
        ]);
      },
      tokens,
    ],
    [
      "Sequential from a Linear",
      (be) => {
        const rng = new Rng(6);
        return new Sequential([
          new Linear(be, 6, 4, { rng }),
          new Tanh(be),
          new Linear(be, 4, 3, { rng }),
        ]);
      },
      feats,
    ],
  ];
  for (const [name, make, input] of cases) {
    for (const fused of [false, true]) {
      const w = `${name}${fused ? " (fused backward)" : ""}`;
      const full = await runNeed(make, input, undefined, fused);
      const asked = await runNeed(make, input, true, fused);
      const skipped = await runNeed(make, input, false, fused);
      assert.notEqual(full.dx, null, `${w}: dx by default`);
      assert.deepEqual(asked.dx, full.dx, `${w}: needInputGrad true is the default`);
      assert.equal(skipped.dx, null, `${w}: null with needInputGrad false`);
      assert.deepEqual(skipped.grads, full.grads, `${w}: identical weight gradients`);
      assert.equal(skipped.leaked, full.leaked, `${w}: nothing left behind`);
    }
  }
});

Deno.test("Layer contract: a non-boolean needInputGrad is refused before any work", () => {
  const be = new CpuBackend();
  for (const l of [new Linear(be, 3, 2, { seed: 1 }), new Sequential([new Tanh(be)])]) {
    const x = uniform(be, [4, 3], 1);
    const y = l.forward(x, { key: 1 });
    const bad = { needInputGrad: "no" as unknown as boolean };
    assertThrowsWith(() => l.backwardInput(y, 1, bad), TypeError, ["needInputGrad", "no"]);
    // The state is untouched: B still runs afterwards.
    const dx = l.backwardInput(y, 1);
    l.backwardWeight(1);
    for (const t of [x, y, dx]) t.dispose();
    l.dispose();
  }
});
