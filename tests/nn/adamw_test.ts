import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { AdamW } from "../../src/nn/adamw.ts";
import { Linear } from "../../src/nn/linear.ts";
import * as ops from "../../src/tensor/ops.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { assertNear } from "./_layer_checks.ts";
import { param } from "./_params.ts";

const backends = await testBackends();

/** f64 reference of AdamW with a fixed gradient. */
function reference(
  p0: Float32Array,
  g: Float32Array,
  lr: number,
  wd: number,
  steps: number,
  b1 = 0.9,
  b2 = 0.999,
  eps = 1e-8,
): number[] {
  const p = [...p0], m = p.map(() => 0), v = p.map(() => 0);
  for (let t = 1; t <= steps; t++) {
    for (let i = 0; i < p.length; i++) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const mh = m[i] / (1 - b1 ** t), vh = v[i] / (1 - b2 ** t);
      p[i] -= lr * (mh / (Math.sqrt(vh) + eps) + wd * p[i]);
    }
  }
  return p;
}

for (const be of backends) {
  Deno.test(`AdamW: per-group lr and weight decay follow the reference over 3 steps (${label(be)}, tol 1e-5)`, async () => {
    const a = param(be, "a", 9, 1), b = param(be, "b", 3, 2);
    const a0 = await a.value.toArray(), b0 = await b.value.toArray();
    const ga = await a.grad.toArray(), gb = await b.grad.toArray();
    const opt = new AdamW([{ params: [a], weightDecay: 0.1 }, {
      params: [b],
      lr: 0.05,
      weightDecay: 0,
    }], {
      lr: 0.01,
    });
    for (let s = 0; s < 3; s++) opt.step();
    assertNear(await a.value.toArray(), reference(a0, ga, 0.01, 0.1, 3), 1e-5, "a");
    assertNear(await b.value.toArray(), reference(b0, gb, 0.05, 0, 3), 1e-5, "b");
    assert.equal(opt.stepCount, 3);
    opt.dispose();
  });
}

Deno.test("AdamW: defaults as PyTorch; state allocated at the first step and freed by dispose", () => {
  const be = new CpuBackend();
  const p = param(be, "p", 6, 4);
  const opt = new AdamW([p]);
  assert.equal(opt.groups[0].lr, 1e-3);
  assert.equal(opt.groups[0].weightDecay, 0.01);
  assert.deepEqual([opt.beta1, opt.beta2, opt.eps], [0.9, 0.999, 1e-8]);
  const before = be.memory.liveBytes;
  assert.equal(opt.stateBytes, 0, "no state before the first step");
  opt.step();
  assert.equal(be.memory.liveBytes, before + 2 * 6 * 4, "m and v");
  assert.equal(opt.stateBytes, 2 * 6 * 4, "stateBytes counts m and v");
  opt.dispose();
  assert.equal(be.memory.liveBytes, before);
  assert.equal(opt.stateBytes, 0);
});

Deno.test("AdamW: bad hyper-parameters are refused with the values", () => {
  const be = new CpuBackend();
  const p = param(be, "p", 2, 1);
  assertThrowsWith(() => new AdamW([p], { beta1: 1 }), RangeError, ["beta1", "got 1"]);
  assertThrowsWith(() => new AdamW([p], { beta2: -0.5 }), RangeError, ["beta2", "-0.5"]);
  assertThrowsWith(() => new AdamW([p], { eps: 0 }), RangeError, ["eps", "0"]);
  assertThrowsWith(() => new AdamW([{ params: [p], lr: Infinity }]), RangeError, [
    "lr of group 0",
    "Infinity",
  ]);
  assertThrowsWith(() => new AdamW("x" as never), TypeError, ["params must be an array"]);
});

Deno.test("AdamW snapshot/restore: a step undone is bit for bit as before it, the first step's moments released", async () => {
  const be = new CpuBackend();
  const lin = new Linear(be, 3, 2, { seed: 4 });
  const opt = new AdamW(lin.parameters(), { lr: 0.1 });
  const grads = () => lin.parameters().forEach((p) => ops.fillInPlace(p.grad, 0.5));
  const values = () => Promise.all(lin.parameters().map((p) => p.value.toArray()));
  for (let round = 0; round < 2; round++) {
    grads();
    const before = await values();
    const stateBefore = await opt.saveState();
    const live = be.memory.liveBytes;
    const snap = opt.snapshot();
    opt.step();
    assert.notDeepEqual(await values(), before);
    opt.restore(snap);
    snap.dispose();
    assert.deepEqual(await values(), before);
    assert.equal(opt.stepCount, stateBefore.step);
    assert.deepEqual(await opt.saveState(), stateBefore);
    // At the first step the moments it made are released again.
    assert.equal(be.memory.liveBytes, live);
    opt.step(); // now really step, so round 1 restores moments that existed
  }
  opt.dispose();
  lin.dispose();
});
