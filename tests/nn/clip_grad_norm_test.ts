import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { clipGradNorm, gradNormSquared, scaleGradsInPlace } from "../../src/nn/clip_grad_norm.ts";
import type { Parameter } from "../../src/nn/layer.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { param } from "./_params.ts";

const backends = await testBackends();

async function normOf(ps: Parameter[]): Promise<number> {
  let s = 0;
  for (const p of ps) for (const g of await p.grad.toArray()) s += g * g;
  return Math.sqrt(s);
}

for (const be of backends) {
  Deno.test(`clipGradNorm: returns the global norm and scales every gradient to maxNorm (${label(be)})`, async () => {
    const ps = [param(be, "a", 10, 1), param(be, "b", 3, 2), param(be, "c", 1, 3)];
    const ref = await normOf(ps);
    const before = await Promise.all(ps.map((p) => p.grad.toArray()));
    const norm = await clipGradNorm(ps, 1.5);
    assert.ok(Math.abs(norm - ref) < 1e-5 * ref, `norm ${norm} vs ${ref}`);
    assert.ok(ref > 1.5, "the test needs a norm above the limit");
    assert.ok(Math.abs(await normOf(ps) - 1.5) < 1e-5, "clipped to maxNorm");
    // Direction kept: each gradient is the old one times one common factor.
    const c = 1.5 / (ref + 1e-6);
    for (const [i, p] of ps.entries()) {
      const g = await p.grad.toArray();
      g.forEach((v, k) => assert.ok(Math.abs(v - c * before[i][k]) < 1e-6));
    }
  });
}

Deno.test("clipGradNorm: below the limit nothing changes; an empty list has norm 0; bad maxNorm", async () => {
  const be = new CpuBackend();
  const ps = [param(be, "a", 4, 1)];
  const g = await ps[0].grad.toArray();
  const norm = await clipGradNorm(ps, 1e6);
  assert.ok(norm > 0);
  assert.deepEqual(await ps[0].grad.toArray(), g);
  assert.equal(await clipGradNorm([], 1), 0);
  await assert.rejects(() => clipGradNorm(ps, 0), RangeError);
  await assert.rejects(
    () => clipGradNorm(ps, -1),
    /maxNorm must be a finite positive number, got -1/,
  );
});

Deno.test("gradNormSquared and scaleGradsInPlace: stage parts add up to the global clip", async () => {
  const be = new CpuBackend();
  const make = () => [param(be, "a", 6, 1), param(be, "b", 4, 2), param(be, "c", 3, 3)];
  const whole = make(), staged = make();
  const norm = await clipGradNorm(whole, 0.5);
  // Two "stages": parameters [a] and [b, c].
  const sq = await gradNormSquared(staged.slice(0, 1)) + await gradNormSquared(staged.slice(1));
  assert.ok(Math.abs(Math.sqrt(sq) - norm) < 1e-6 * norm);
  const c = 0.5 / (Math.sqrt(sq) + 1e-6);
  scaleGradsInPlace(staged.slice(0, 1), c);
  scaleGradsInPlace(staged.slice(1), c);
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(await staged[i].grad.toArray(), await whole[i].grad.toArray());
  }
  assert.throws(() => scaleGradsInPlace(staged, NaN), /factor must be a finite number, got NaN/);
});
