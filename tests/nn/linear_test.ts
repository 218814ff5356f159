import assert from "node:assert/strict";
import type { Backend } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { Linear } from "../../src/nn/linear.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";
import { tensorStorage } from "../../src/tensor/tensor.ts";

const backends = await testBackends();
const make = (be: Backend) => new Linear(be, 5, 3, { seed: 11 });
// 3-D input: Linear acts on the last dimension of any leading shape.
const input = (be: Backend, seed: number) => uniform(be, [2, 3, 5], seed);

Deno.test("Linear: B and W match central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  // L is linear in x and in W, so the differences are exact up to f32 rounding.
  const worst = await gradCheck(make, input, {
    prepare: (l) => {
      // A non-zero bias makes the bias gradient check meaningful beyond zeros.
      const b = tensorStorage((l as Linear).bias!) as Float32Array;
      b.set([0.3, -0.2, 0.1]);
    },
  });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("Linear: B then W equals the fused backward bitwise over interleaved micro-batches", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`Linear: ${label(be)} matches the CPU reference (tol 1e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-4);
  });
}

Deno.test("Linear: without bias there is only a weight", () => {
  const be = new CpuBackend();
  const l = new Linear(be, 2, 2, { bias: false });
  assert.deepEqual(l.parameters().map((p) => p.name), ["weight"]);
  assert.deepEqual(l.cost([4, 2]), { params: 4, flops: 2 * 4 * 2 * 2 });
  l.dispose();
});

Deno.test("Linear: the same seed gives the same weights, another seed others", async () => {
  const be = new CpuBackend();
  const a = new Linear(be, 4, 4, { seed: 3 }), b = new Linear(be, 4, 4, { seed: 3 });
  const c = new Linear(be, 4, 4, { seed: 4 });
  assert.deepEqual(await a.weight.toArray(), await b.weight.toArray());
  assert.notDeepEqual(await a.weight.toArray(), await c.weight.toArray());
  for (const l of [a, b, c]) l.dispose();
});

Deno.test("Linear: bad sizes and inputs name the values", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new Linear(be, 0, 3), RangeError, ["inFeatures", "got 0"]);
  assertThrowsWith(() => new Linear(be, 3, -2), RangeError, ["outFeatures", "got -2"]);
  assertThrowsWith(() => new Linear(be, 2.5, 3), RangeError, ["inFeatures", "2.5"]);
  const l = new Linear(be, 4, 3);
  const x = be.zeros([2, 5]);
  assertThrowsWith(() => l.forward(x), RangeError, ["inFeatures = 4", "[2, 5]"]);
  assertThrowsWith(() => l.outputShape([2, 5]), RangeError, ["inFeatures = 4", "[2, 5]"]);
  assert.deepEqual(l.heldKeys(), []);
  x.dispose();
  l.dispose();
});
