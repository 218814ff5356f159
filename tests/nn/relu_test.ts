import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu_backend.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck } from "./_layer_checks.ts";
import { lcgData } from "../tensor/_helpers.ts";

const backends = await testBackends();
const make = (be: Backend) => new ReLU(be);
// ReLU has a kink at 0: inputs keep |x| ≥ 0.1, far beyond the step eps = 1e-2; about a third negative.
const input = (be: Backend, seed: number): Tensor => {
  const d = lcgData(12, seed, 0.1, 1);
  for (let i = 0; i < d.length; i++) if ((i * 5 + seed) % 3 === 0) d[i] = -d[i];
  return be.fromData(d, [3, 4]);
};

Deno.test("ReLU: B matches central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  const worst = await gradCheck(make, input, { maxProbes: 12 });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("ReLU: B then W equals the fused backward bitwise over interleaved micro-batches", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`ReLU: ${label(be)} matches the CPU reference (tol 1e-5)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-5);
  });
}

Deno.test("ReLU: no parameters, shape kept, state freed by W", () => {
  const be = new CpuBackend();
  const l = new ReLU(be);
  assert.deepEqual(l.parameters(), []);
  assert.deepEqual(l.outputShape([2, 3, 4]), [2, 3, 4]);
  assert.equal(l.cost([2, 3]).params, 0);
  const x = be.zeros([2, 3]);
  const y = l.forward(x, { key: "a" });
  assert.deepEqual(l.heldKeys(), ["a"]);
  const dx = l.backward(y, "a");
  assert.deepEqual(l.heldKeys(), []);
  for (const t of [x, y, dx]) t.dispose();
  assert.equal(be.memory.liveBytes, 0, "every tensor released");
});
