import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { MLP } from "../../src/nn/mlp.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";

const backends = await testBackends();
const make = (be: Backend) => new MLP(be, 4, { hidden: 6, seed: 3 });
const input = (be: Backend, seed: number): Tensor => uniform(be, [2, 3, 4], seed);

Deno.test("MLP: B and W match central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  const worst = await gradCheck(make, input, { maxProbes: 16 });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("MLP: B then W equals the fused backward bitwise", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`MLP: ${label(be)} matches the CPU reference (tol 1e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-4);
  });
}

Deno.test("MLP: parameter names, cost, default hidden width, bad sizes", () => {
  const be = new CpuBackend();
  const m = make(be);
  assert.deepEqual(m.parameters().map((p) => p.name), [
    "fc.weight",
    "fc.bias",
    "proj.weight",
    "proj.bias",
  ]);
  // params: 4·6 + 6 + 6·4 + 4; flops: two matmuls over 6 rows (2·6·4·6 each) + 8 per GELU element.
  assert.deepEqual(m.cost([6, 4]), { params: 58, flops: 2 * (2 * 6 * 4 * 6) + 8 * 36 });
  const d = new MLP(be, 3);
  assert.equal(d.hidden, 12);
  assertThrowsWith(() => new MLP(be, 4, { hidden: 0 }), RangeError, ["hidden", "got 0"]);
  assertThrowsWith(() => m.outputShape([2, 5]), RangeError, ["dim = 4", "[2, 5]"]);
  m.dispose();
  d.dispose();
});
