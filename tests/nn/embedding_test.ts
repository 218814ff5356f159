import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { Embedding } from "../../src/nn/embedding.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, ids } from "./_layer_checks.ts";

const backends = await testBackends();
const make = (be: Backend) => new Embedding(be, 7, 4, { seed: 5 });
// 12 ids over 7 rows: repeated ids exercise the scatter-add.
const input = (be: Backend, seed: number): Tensor => ids(be, [3, 4], 7, seed);

Deno.test("Embedding: W matches central finite differences; B returns zeros for the ids", async () => {
  const worst = await gradCheck(make, input, { checkInput: false, maxProbes: 28 });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
  const be = new CpuBackend();
  const e = make(be);
  const x = input(be, 1);
  const y = e.forward(x);
  const dx = e.backward(y);
  assert.deepEqual(dx.shape, x.shape);
  assert.ok((await dx.toArray()).every((v) => v === 0));
  for (const t of [x, y, dx]) t.dispose();
  e.dispose();
});

Deno.test("Embedding: B then W equals the fused backward bitwise over interleaved micro-batches", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`Embedding: ${label(be)} matches the CPU reference (tol 1e-5)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-5);
  });
}

Deno.test("Embedding: output rows are table rows", async () => {
  const be = new CpuBackend();
  const e = make(be);
  const x = be.fromData(new Float32Array([6, 0]), [2]);
  const y = await e.forward(x, { save: false }).toArray();
  const w = await e.weight.toArray();
  assert.deepEqual([...y], [...w.subarray(24, 28), ...w.subarray(0, 4)]);
  e.dispose();
});

Deno.test("Embedding: bad sizes name the values", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new Embedding(be, 0, 4), RangeError, ["numEmbeddings", "got 0"]);
  assertThrowsWith(() => new Embedding(be, 4, -1), RangeError, ["dim", "got -1"]);
});
