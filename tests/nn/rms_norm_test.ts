import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { RMSNorm } from "../../src/nn/rms_norm.ts";
import type { Layer } from "../../src/nn/layer.ts";
import { assertThrowsWith, lcgData } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";
import { tensorStorage } from "../../src/tensor/tensor.ts";

const backends = await testBackends();
const make = (be: Backend) => new RMSNorm(be, 6, { eps: 1e-5 });
const input = (be: Backend, seed: number): Tensor => uniform(be, [2, 3, 6], seed, -2, 2);

// weight = 1 at init would hide a missing scale: randomise it.
function randomWeight(l: Layer): void {
  (tensorStorage((l as RMSNorm).weight) as Float32Array).set(lcgData(6, 3, 0.5, 1.5));
}

Deno.test("RMSNorm: I and W match central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  const worst = await gradCheck(make, input, { prepare: randomWeight });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("RMSNorm: I then W equals the fused backward bitwise over interleaved micro-batches", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`RMSNorm: ${label(be)} matches the CPU reference (tol 1e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-4);
  });
}

Deno.test("RMSNorm: rows have mean square 1 at init; one parameter named weight; eps default 2^-23", async () => {
  const be = new CpuBackend();
  const n = make(be);
  assert.deepEqual(n.parameters().map((p) => p.name), ["weight"]);
  assert.equal(new RMSNorm(be, 4).eps, 2 ** -23);
  const y = await n.forward(input(be, 9), { save: false }).toArray();
  for (let r = 0; r < 6; r++) {
    const ms = y.subarray(r * 6, r * 6 + 6).reduce((a, b) => a + b * b, 0) / 6;
    assert.ok(Math.abs(ms - 1) < 1e-3, `row ${r}: mean square ${ms}`);
  }
  n.dispose();
});

Deno.test("RMSNorm: bad sizes, eps and widths name the values", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new RMSNorm(be, 0), RangeError, ["dim", "got 0"]);
  assertThrowsWith(() => new RMSNorm(be, 4, { eps: -1 }), RangeError, ["eps", "-1"]);
  const n = new RMSNorm(be, 4);
  assertThrowsWith(() => n.outputShape([3, 5]), RangeError, ["dim = 4", "[3, 5]"]);
  n.dispose();
});
