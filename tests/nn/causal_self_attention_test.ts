import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { CausalSelfAttention } from "../../src/nn/causal_self_attention.ts";
import { assertThrowsWith, lcgData } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";

const backends = await testBackends();
// B = 2, T = 3, dim 4, 2 heads of width 2.
const make = (be: Backend) => new CausalSelfAttention(be, 4, 2, { seed: 8 });
const input = (be: Backend, seed: number): Tensor => uniform(be, [2, 3, 4], seed);

Deno.test("CausalSelfAttention: B and W match central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  const worst = await gradCheck(make, input, { maxProbes: 24 });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("CausalSelfAttention: B then W equals the fused backward bitwise", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`CausalSelfAttention: ${label(be)} matches the CPU reference (tol 1e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-4);
  });
}

Deno.test("CausalSelfAttention: position t does not see later positions", async () => {
  const be = new CpuBackend();
  const attn = make(be);
  const a = lcgData(24, 1), b = new Float32Array(a);
  for (let i = 0; i < 4; i++) b[8 + i] += 1; // change only position 2 of batch 0
  const ya = await attn.forward(be.fromData(a, [2, 3, 4]), { save: false }).toArray();
  const yb = await attn.forward(be.fromData(b, [2, 3, 4]), { save: false }).toArray();
  assert.deepEqual(ya.subarray(0, 8), yb.subarray(0, 8), "positions 0 and 1 unchanged");
  assert.notDeepEqual(ya.subarray(8, 12), yb.subarray(8, 12), "position 2 changed");
  assert.deepEqual(ya.subarray(12), yb.subarray(12), "the other batch entry unchanged");
  assert.deepEqual(attn.parameters().map((p) => p.name), [
    "qkv.weight",
    "qkv.bias",
    "proj.weight",
    "proj.bias",
  ]);
  attn.dispose();
});

Deno.test("CausalSelfAttention: heads not dividing the width, wrong widths and ranks are refused", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new CausalSelfAttention(be, 6, 4), RangeError, ["heads = 4", "dim = 6"]);
  assertThrowsWith(() => new CausalSelfAttention(be, 6, 0), RangeError, ["heads", "got 0"]);
  const attn = make(be);
  assertThrowsWith(() => attn.outputShape([2, 3, 5]), RangeError, ["dim = 4", "[2, 3, 5]"]);
  assertThrowsWith(() => attn.outputShape([6, 4]), RangeError, ["[batch, T, dim = 4]", "[6, 4]"]);
  attn.dispose();
});
