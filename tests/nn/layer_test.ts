import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu_backend.ts";
import { DEFAULT_KEY } from "../../src/nn/layer.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Tanh } from "../../src/nn/tanh.ts";
import { TransformerBlock } from "../../src/nn/transformer_block.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { gradCheck, uniform } from "./_layer_checks.ts";

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
