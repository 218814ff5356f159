import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { TokenPositionEmbedding } from "../../src/nn/token_position_embedding.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, ids } from "./_layer_checks.ts";

const backends = await testBackends();
const make = (be: Backend) => new TokenPositionEmbedding(be, 9, 5, 3, { seed: 2, initScale: 0.5 });
const input = (be: Backend, seed: number): Tensor => ids(be, [2, 4], 9, seed);

Deno.test("TokenPositionEmbedding: W matches central finite differences for both tables", async () => {
  const worst = await gradCheck(make, input, { checkInput: false, maxProbes: 27 });
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("TokenPositionEmbedding: B then W equals the fused backward bitwise", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`TokenPositionEmbedding: ${label(be)} matches the CPU reference (tol 1e-5)`, async () => {
    await checkAgainstCpu(be, make, input, 1e-5);
  });
}

Deno.test("TokenPositionEmbedding: y[b, t] = token[id] + position[t]; shorter sequences work", async () => {
  const be = new CpuBackend();
  const e = make(be);
  const tok = await e.token.toArray(), pos = await e.position.toArray();
  const x = be.fromData(new Float32Array([4, 8, 0, 4]), [2, 2]); // T = 2 < maxLen = 5
  const y = await e.forward(x, { save: false }).toArray();
  const idv = [4, 8, 0, 4];
  for (let r = 0; r < 4; r++) {
    for (let c = 0; c < 3; c++) {
      assert.equal(y[r * 3 + c], Math.fround(tok[idv[r] * 3 + c] + pos[(r % 2) * 3 + c]));
    }
  }
  assert.deepEqual(e.parameters().map((p) => p.name), ["token", "position"]);
  e.dispose();
  x.dispose();
});

Deno.test("TokenPositionEmbedding: a sequence longer than maxLen or a non-2-D input is refused", () => {
  const be = new CpuBackend();
  const e = make(be);
  assertThrowsWith(() => e.outputShape([2, 6]), RangeError, ["maxLen = 5", "[2, 6]"]);
  assertThrowsWith(() => e.outputShape([8]), RangeError, ["[batch, T]", "[8]"]);
  assertThrowsWith(() => new TokenPositionEmbedding(be, 9, 0, 3), RangeError, ["maxLen", "got 0"]);
  e.dispose();
});
