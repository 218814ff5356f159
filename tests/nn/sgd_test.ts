import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import type { Tensor } from "../../src/tensor/mod.ts";
import * as ops from "../../src/tensor/ops.ts";
import { SGD } from "../../src/nn/sgd.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { assertNear } from "./_layer_checks.ts";
import { param } from "./_params.ts";

const backends = await testBackends();

/** f64 reference of PyTorch's SGD (no dampening, no Nesterov) with a fixed gradient. */
function reference(
  p0: Float32Array,
  g: Float32Array,
  lr: number,
  mu: number,
  wd: number,
  steps: number,
): number[] {
  const p = [...p0], buf: number[] = [];
  for (let s = 0; s < steps; s++) {
    for (let i = 0; i < p.length; i++) {
      const d = g[i] + wd * p[i];
      buf[i] = s === 0 ? d : mu * buf[i] + d;
      p[i] -= lr * (mu === 0 ? d : buf[i]);
    }
  }
  return p;
}

for (const be of backends) {
  Deno.test(`SGD: momentum and weight decay per group follow the reference over 3 steps (${label(be)}, tol 1e-5)`, async () => {
    const a = param(be, "a", 7, 1), b = param(be, "b", 5, 2);
    const a0 = await a.value.toArray(), b0 = await b.value.toArray();
    const ga = await a.grad.toArray(), gb = await b.grad.toArray();
    const opt = new SGD([{ params: [a], lr: 0.1, weightDecay: 0.05 }, { params: [b] }], {
      lr: 0.02,
      momentum: 0.9,
    });
    for (let s = 0; s < 3; s++) opt.step();
    assert.equal(opt.stepCount, 3);
    assertNear(await a.value.toArray(), reference(a0, ga, 0.1, 0.9, 0.05, 3), 1e-5, "a");
    assertNear(await b.value.toArray(), reference(b0, gb, 0.02, 0.9, 0, 3), 1e-5, "b");
    opt.dispose();
  });
}

Deno.test("SGD: plain SGD is p − lr·g; zeroGrad clears; dispose frees the buffers", async () => {
  const be = new CpuBackend();
  const p = param(be, "p", 4, 3);
  const v0 = await p.value.toArray(), g = await p.grad.toArray();
  const before = be.memory.liveBytes;
  const opt = new SGD([p], { lr: 0.5 });
  opt.step();
  const v = await p.value.toArray();
  for (let i = 0; i < 4; i++) assert.equal(v[i], Math.fround(v0[i] - 0.5 * g[i]));
  opt.zeroGrad();
  assert.ok((await p.grad.toArray()).every((x) => x === 0));
  const withMomentum = new SGD([p], { momentum: 0.5 });
  withMomentum.step();
  assert.ok(be.memory.liveBytes > before, "a momentum buffer exists");
  withMomentum.dispose();
  assert.equal(be.memory.liveBytes, before);
  // The learning rate of a group may change between steps (a schedule).
  opt.groups[0].lr = 0;
  const w = await p.value.toArray();
  opt.step();
  assert.deepEqual(await p.value.toArray(), w);
});

Deno.test("SGD: bad hyper-parameters and groups are refused with the values", () => {
  const be = new CpuBackend();
  const p = param(be, "p", 2, 1);
  assertThrowsWith(() => new SGD([p], { momentum: 1 }), RangeError, ["momentum", "got 1"]);
  assertThrowsWith(() => new SGD([p], { lr: -0.1 }), RangeError, ["lr", "-0.1"]);
  assertThrowsWith(() => new SGD([{ params: [p], weightDecay: NaN }]), RangeError, [
    "weightDecay",
    "NaN",
  ]);
  assertThrowsWith(() => new SGD([{ params: [p] }, { params: [p] }]), RangeError, [
    "p",
    "more than one group",
  ]);
  const opt = new SGD([p]);
  opt.groups[0].lr = -1;
  assertThrowsWith(() => opt.step(), RangeError, ["lr", "-1"]);
  assert.equal(opt.stepCount, 0);
});

/** The unfused update SGD ran before the fused kernel: scale, axpys and a fresh buffer per step. */
function unfusedStep(
  p: { value: Tensor; grad: Tensor },
  bufs: Map<Tensor, Tensor>,
  lr: number,
  mu: number,
  wd: number,
): void {
  let d = p.grad, owned = false;
  if (wd !== 0) {
    d = ops.scale(p.value, wd);
    ops.axpyInPlace(d, 1, p.grad);
    owned = true;
  }
  if (mu !== 0) {
    const old = bufs.get(p.value);
    let buf: Tensor;
    if (old === undefined) buf = ops.copy(d);
    else {
      buf = ops.scale(old, mu);
      ops.axpyInPlace(buf, 1, d);
      old.dispose();
    }
    bufs.set(p.value, buf);
    if (owned) d.dispose();
    d = buf;
    owned = false;
  }
  ops.axpyInPlace(p.value, -lr, d);
  if (owned) d.dispose();
}

for (const be of backends) {
  Deno.test(`SGD: the fused step equals the previous unfused ops over 5 steps, with no per-step allocation (${label(be)}, tol 1e-6)`, async () => {
    for (const [mu, wd] of [[0.9, 0.05], [0, 0.05], [0.5, 0], [0, 0]]) {
      const fused = param(be, "p", 300, 4), old = param(be, "p", 300, 4);
      const bufs = new Map<Tensor, Tensor>();
      const opt = new SGD([fused], { lr: 0.05, momentum: mu, weightDecay: wd });
      opt.step(); // allocates the momentum buffer, if any
      unfusedStep(old, bufs, 0.05, mu, wd);
      const live = be.memory.liveBytes;
      for (let s = 1; s < 5; s++) {
        opt.step();
        unfusedStep(old, bufs, 0.05, mu, wd);
        await be.sync();
      }
      const w = `momentum ${mu} weightDecay ${wd}`;
      assertNear(await fused.value.toArray(), await old.value.toArray(), 1e-6, `param ${w}`);
      for (const b of bufs.values()) b.dispose();
      assert.equal(
        be.memory.liveBytes,
        live - (mu === 0 ? 0 : 300 * 4),
        `SGD steps allocate nothing (${w})`,
      );
      opt.dispose();
      for (const p of [fused, old]) {
        p.value.dispose();
        p.grad.dispose();
      }
    }
  });
}
