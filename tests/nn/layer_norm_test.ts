import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { LayerNorm } from "../../src/nn/layer_norm.ts";
import type { Layer } from "../../src/nn/layer.ts";
import { assertThrowsWith, lcgData } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";
import { tensorStorage } from "../../src/tensor/tensor.ts";

const backends = await testBackends();
const make = (be: Backend) => new LayerNorm(be, 6);
const input = (be: Backend, seed: number): Tensor => uniform(be, [2, 3, 6], seed, -2, 2);

// γ = 1, β = 0 at init would hide mistakes that mix them up: randomise both.
function randomAffine(l: Layer): void {
  const ln = l as LayerNorm;
  (tensorStorage(ln.weight) as Float32Array).set(lcgData(6, 3, 0.5, 1.5));
  (tensorStorage(ln.bias) as Float32Array).set(lcgData(6, 4, -0.5, 0.5));
}

Deno.test("LayerNorm: B and W match central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  const worst = await gradCheck(make, input, { prepare: randomAffine });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("LayerNorm: B then W equals the fused backward bitwise over interleaved micro-batches", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`LayerNorm: ${label(be)} matches the CPU reference (tol 1e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-4);
  });
}

Deno.test("LayerNorm: each row has mean 0 and variance about 1 at init; names as PyTorch", async () => {
  const be = new CpuBackend();
  const ln = make(be);
  assert.deepEqual(ln.parameters().map((p) => p.name), ["weight", "bias"]);
  const x = input(be, 9);
  const y = await ln.forward(x, { save: false }).toArray();
  for (let r = 0; r < 6; r++) {
    const row = y.subarray(r * 6, r * 6 + 6);
    const m = row.reduce((a, b) => a + b, 0) / 6;
    const v = row.reduce((a, b) => a + (b - m) ** 2, 0) / 6;
    assert.ok(Math.abs(m) < 1e-5 && Math.abs(v - 1) < 1e-3, `row ${r}: mean ${m}, var ${v}`);
  }
  ln.dispose();
});

Deno.test("LayerNorm: bad sizes and widths name the values", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new LayerNorm(be, 0), RangeError, ["dim", "got 0"]);
  assertThrowsWith(() => new LayerNorm(be, 4, { eps: -1 }), RangeError, ["eps", "-1"]);
  const ln = new LayerNorm(be, 4);
  assertThrowsWith(() => ln.outputShape([3, 5]), RangeError, ["dim = 4", "[3, 5]"]);
  ln.dispose();
});
