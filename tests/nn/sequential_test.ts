import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { GELU } from "../../src/nn/gelu.ts";
import { LayerNorm } from "../../src/nn/layer_norm.ts";
import { Linear } from "../../src/nn/linear.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { Tanh } from "../../src/nn/tanh.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";

const backends = await testBackends();
const make = (be: Backend) =>
  new Sequential([
    new Linear(be, 4, 6, { seed: 1 }),
    new Tanh(be),
    new LayerNorm(be, 6),
    new Linear(be, 6, 5, { seed: 2 }),
    new GELU(be),
    new Linear(be, 5, 3, { seed: 3 }),
  ]);
const input = (be: Backend, seed: number): Tensor => uniform(be, [5, 4], seed);

Deno.test("Sequential: B and W match central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  const worst = await gradCheck(make, input, { maxProbes: 12 });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("Sequential: B then W equals the fused backward bitwise", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`Sequential: ${label(be)} matches the CPU reference (tol 1e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-4);
  });
}

Deno.test("Sequential: slices share layers, keep names, and chain to the whole model's result", async () => {
  const be = new CpuBackend();
  const m = make(be);
  assert.equal(m.layers.length, 6);
  assert.deepEqual(m.layers.map((l) => l.kind), [
    "Linear",
    "Tanh",
    "LayerNorm",
    "Linear",
    "GELU",
    "Linear",
  ]);
  const a = m.slice(0, 3), b = m.slice(3);
  assert.equal(a.layers[0], m.layers[0]);
  assert.deepEqual(b.parameters().map((p) => p.name), ["3.weight", "3.bias", "5.weight", "5.bias"]);
  assert.deepEqual(
    [...a.parameters(), ...b.parameters()].map((p) => p.name),
    m.parameters().map((p) => p.name),
  );
  const x = input(be, 4);
  const whole = await m.forward(x, { save: false }).toArray();
  const h = a.forward(x, { save: false });
  assert.deepEqual(await b.forward(h, { save: false }).toArray(), whole);
  // A nested Sequential is a layer too.
  const nested = new Sequential([a, b], { names: ["s0", "s1"] });
  assert.deepEqual(await nested.forward(x, { save: false }).toArray(), whole);
  assert.equal(nested.parameters()[0].name, "s0.0.weight");
  m.dispose();
});

Deno.test("Sequential: shapes, costs per layer, and the sum", () => {
  const be = new CpuBackend();
  const m = make(be);
  assert.deepEqual(m.shapes([5, 4]), [[5, 6], [5, 6], [5, 6], [5, 5], [5, 5], [5, 3]]);
  const costs = m.costs([5, 4]);
  assert.deepEqual(costs[0], { params: 4 * 6 + 6, flops: 2 * 5 * 4 * 6 });
  assert.deepEqual(costs[5], { params: 5 * 3 + 3, flops: 2 * 5 * 5 * 3 });
  const total = m.cost([5, 4]);
  assert.equal(total.params, costs.reduce((s, c) => s + c.params, 0));
  assert.equal(total.flops, costs.reduce((s, c) => s + c.flops, 0));
  assert.equal(total.params, m.parameters().reduce((s, p) => s + p.value.size, 0));
  m.dispose();
});

Deno.test("Sequential: a shape mismatch between layers names both layers and the shapes", () => {
  const be = new CpuBackend();
  const layers = [new Linear(be, 4, 8), new ReLU(be), new Linear(be, 16, 2)];
  assertThrowsWith(
    () => new Sequential(layers, { inputShape: [3, 4] }),
    RangeError,
    ["layer 2 (Linear)", "layer 1 (ReLU)", "[3, 8]", "inFeatures = 16"],
  );
  const m = new Sequential(layers); // without inputShape the check runs at forward
  const x = be.zeros([3, 4]);
  assertThrowsWith(() => m.forward(x), RangeError, ["layer 2 (Linear)", "[3, 8]"]);
  assert.deepEqual(m.heldKeys(), [], "nothing ran");
  const wide = be.zeros([3, 5]);
  assertThrowsWith(() => m.forward(wide), RangeError, ["layer 0 (Linear)", "the input", "[3, 5]"]);
  for (const t of [x, wide]) t.dispose();
  m.dispose();
});

Deno.test("Sequential: bad construction and slices are refused with the values", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new Sequential([]), RangeError, ["at least one layer", "got 0"]);
  const r = new ReLU(be);
  assertThrowsWith(() => new Sequential([r, {} as ReLU]), TypeError, ["layers[1]"]);
  assertThrowsWith(() => new Sequential([r], { names: ["a", "b"] }), RangeError, [
    "2 names",
    "1 layers",
  ]);
  assertThrowsWith(() => new Sequential([r, r]), RangeError, ["layers[1]", "layers[0]"]);
  const r2 = new ReLU(be);
  assertThrowsWith(() => new Sequential([r, r2], { names: ["a", "a"] }), RangeError, ["unique"]);
  const m = new Sequential([r, new ReLU(be)]);
  assertThrowsWith(() => m.slice(1, 1), RangeError, ["start = 1", "end = 1"]);
  assertThrowsWith(() => m.slice(0, 3), RangeError, ["end ≤ 2", "end = 3"]);
});

Deno.test("Sequential: a forward whose key is still held in any layer is refused before any work", () => {
  const be = new CpuBackend();
  const m = make(be);
  const x = input(be, 1);
  // Only the last layer holds key "k" (e.g. a stray earlier forward of that stage).
  const h = m.slice(0, 5).forward(x, { save: false });
  m.layers[5].forward(h, { key: "k" }).dispose();
  assertThrowsWith(() => m.forward(x, { key: "k" }), Error, ["layer 5 (Linear)", '"k"']);
  assert.deepEqual(m.layers[0].heldKeys(), []);
  m.dropState("k");
  assert.deepEqual(m.heldKeys(), []);
  for (const t of [x, h]) t.dispose();
  m.dispose();
});

// Accepts any shape, then fails while running (as an id out of range does on the CPU).
class Failing extends ReLU {
  protected override forwardImpl(): never {
    throw new RangeError("Failing: refused at run time");
  }
}

Deno.test("Sequential: a forward failing in a later layer leaves no state or tensor behind", () => {
  const be = new CpuBackend();
  const m = new Sequential([new Linear(be, 3, 4, { seed: 1 }), new Tanh(be), new Failing(be)]);
  const before = be.memory.liveBytes;
  const x = uniform(be, [2, 3], 1);
  assert.throws(() => m.forward(x, { key: "k" }), /refused at run time/);
  assert.deepEqual(m.heldKeys(), [], "the layers that ran dropped their state");
  x.dispose();
  assert.equal(be.memory.liveBytes, before, "intermediate activations released");
  m.dispose();
});
