import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { Residual } from "../../src/nn/residual.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { LayerNorm } from "../../src/nn/layer_norm.ts";
import { Linear } from "../../src/nn/linear.ts";
import { MLP } from "../../src/nn/mlp.ts";
import { layerFromSpec } from "../../src/nn/layer_registry.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";

const backends = await testBackends();
// A pre-norm MLP half of a Transformer block.
const make = (be: Backend) =>
  new Residual(
    be,
    new Sequential([new LayerNorm(be, 4), new MLP(be, 4, { hidden: 6, seed: 3 })], {
      names: ["ln", "mlp"],
    }),
  );
const input = (be: Backend, seed: number): Tensor => uniform(be, [2, 3, 4], seed);

Deno.test("Residual: I and W match central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)", async () => {
  const worst = await gradCheck(make, input, { maxProbes: 16 });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("Residual: I then W equals the fused backward bitwise", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`Residual: ${label(be)} matches the CPU reference (tol 1e-4)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-4);
  });
}

Deno.test("Residual: y = x + inner(x); names, cost, spec round trip, shape rule", async () => {
  const be = new CpuBackend();
  const r = make(be);
  assert.deepEqual(r.parameters().map((p) => p.name), [
    "inner.ln.weight",
    "inner.ln.bias",
    "inner.mlp.fc.weight",
    "inner.mlp.fc.bias",
    "inner.mlp.proj.weight",
    "inner.mlp.proj.bias",
  ]);
  const x = input(be, 9);
  const y = r.forward(x, { save: false }), f = r.inner.forward(x, { save: false });
  const [xs, ys, fs] = await Promise.all([x.toArray(), y.toArray(), f.toArray()]);
  ys.forEach((v, i) => assert.equal(v, Math.fround(xs[i] + fs[i])));
  const c = r.inner.cost([6, 4]);
  assert.deepEqual(r.cost([6, 4]), { params: c.params, flops: c.flops + 24 });
  const copy = layerFromSpec(JSON.parse(JSON.stringify(r.spec())), be);
  assert.deepEqual(copy.spec?.(), r.spec());
  assert.deepEqual(copy.parameters().map((p) => p.name), r.parameters().map((p) => p.name));
  const bad = new Residual(be, new Linear(be, 4, 3, { seed: 1 }));
  assertThrowsWith(() => bad.outputShape([2, 4]), RangeError, ["keep its input's shape", "[2, 3]"]);
  assertThrowsWith(() => new Residual(be, null as never), TypeError, ["inner must be a Layer"]);
  for (const t of [x, y, f]) t.dispose();
  for (const l of [r, copy, bad]) l.dispose();
});
