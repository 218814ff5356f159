import assert from "node:assert/strict";
import { LayerScale } from "../../examples/own_layer.ts";
import { gradCheck, uniform } from "../nn/_layer_checks.ts";
import { layerFromSpec } from "../../src/nn/layer_registry.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";

Deno.test("examples/own_layer.ts: LayerScale's I and W passes match finite differences; its spec rebuilds it", async () => {
  await gradCheck((be) => new LayerScale(be, 5, 0.7), (be, seed) => uniform(be, [3, 4, 5], seed));
  const be = new CpuBackend();
  const a = new LayerScale(be, 5, 0.7);
  const b = layerFromSpec(a.spec(), be);
  assert.equal(b.kind, "LayerScale");
  assert.deepEqual(b.spec?.(), a.spec());
  a.dispose();
  b.dispose();
});

Deno.test("examples/own_layer.ts runs as the README shows: workers import it, the loss falls", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../../examples/own_layer.ts", import.meta.url).pathname],
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const losses = [...text.matchAll(/loss ([\d.]+)/g)].map((m) => Number(m[1]));
  assert.equal(losses.length, 3);
  assert.ok(losses[2] < losses[0] / 2, `losses ${losses}`);
});
