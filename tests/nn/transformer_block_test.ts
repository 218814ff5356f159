import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { TransformerBlock } from "../../src/nn/transformer_block.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";
import { tensorStorage } from "../../src/tensor/tensor.ts";

const backends = await testBackends();
const make = (be: Backend) => new TransformerBlock(be, 4, 2, { hidden: 8, seed: 6 });
const input = (be: Backend, seed: number): Tensor => uniform(be, [2, 3, 4], seed);

Deno.test("TransformerBlock: B and W match central finite differences (eps 1e-2, rtol 3e-2, atol 3e-3)", async () => {
  // Deepest composite: layer norms after attention make the curvature larger, hence the wider bound.
  const worst = await gradCheck(make, input, {
    maxProbes: 12,
    tol: { eps: 1e-2, rtol: 3e-2, atol: 3e-3 },
  });
  assert.ok(worst < 3e-3, `worst error ${worst}`);
});

Deno.test("TransformerBlock: B then W equals the fused backward bitwise", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`TransformerBlock: ${label(be)} matches the CPU reference (tol 2e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 2e-4);
  });
}

Deno.test("TransformerBlock: parameters are prefixed by sublayer; the residual passes x through", async () => {
  const be = new CpuBackend();
  const b = make(be);
  assert.deepEqual(b.parameters().map((p) => p.name), [
    "ln1.weight",
    "ln1.bias",
    "attn.qkv.weight",
    "attn.qkv.bias",
    "attn.proj.weight",
    "attn.proj.bias",
    "ln2.weight",
    "ln2.bias",
    "mlp.fc.weight",
    "mlp.fc.bias",
    "mlp.proj.weight",
    "mlp.proj.bias",
  ]);
  // With both output projections zeroed, each branch adds exactly 0: y = x.
  for (const p of b.parameters()) {
    if (p.name.endsWith("proj.weight") || p.name.endsWith("proj.bias")) {
      (tensorStorage(p.value) as Float32Array).fill(0);
    }
  }
  const x = input(be, 3);
  assert.deepEqual(await b.forward(x, { save: false }).toArray(), await x.toArray());
  b.dispose();
});

Deno.test("TransformerBlock: heads not dividing the width and wrong widths are refused", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new TransformerBlock(be, 10, 4), RangeError, ["heads = 4", "dim = 10"]);
  assertThrowsWith(() => new TransformerBlock(be, -4, 2), RangeError, ["dim", "-4"]);
  const b = make(be);
  assertThrowsWith(() => b.outputShape([1, 3, 8]), RangeError, ["dim = 4", "[1, 3, 8]"]);
  b.dispose();
});
