import assert from "node:assert/strict";
import type { Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import { crossEntropyLoss, mseLoss } from "../../src/nn/losses.ts";
import { Linear } from "../../src/nn/linear.ts";
import { assertThrowsWith, lcgData } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { assertNear, ids, uniform } from "./_layer_checks.ts";

const backends = await testBackends();

async function value(t: Tensor): Promise<number> {
  return (await t.toArray())[0];
}

/** f64 reference of the cross-entropy mean over rows. */
function ceRef(logits: Float32Array, targets: Float32Array, v: number): number {
  let total = 0;
  for (let r = 0; r < targets.length; r++) {
    const row = logits.subarray(r * v, r * v + v);
    const m = Math.max(...row);
    const lse = m + Math.log(row.reduce((s, x) => s + Math.exp(x - m), 0));
    total += lse - row[targets[r]];
  }
  return total / targets.length;
}

Deno.test("crossEntropyLoss: value equals an f64 reference; gradient matches finite differences", async () => {
  const be = new CpuBackend();
  const logits = uniform(be, [2, 3, 5], 1, -2, 2); // 6 rows of 5 classes
  const targets = ids(be, [2, 3], 5, 2);
  const l = await logits.toArray(), t = await targets.toArray();
  const { loss, grad } = crossEntropyLoss(logits, targets);
  assert.deepEqual(grad.shape, [2, 3, 5]);
  assert.ok(Math.abs(await value(loss) - ceRef(l, t, 5)) < 1e-6);
  const g = await grad.toArray();
  const eps = 1e-3;
  for (let i = 0; i < l.length; i++) {
    const p = new Float64Array(l), m = new Float64Array(l);
    p[i] += eps;
    m[i] -= eps;
    const num = (ceRef(new Float32Array(p), t, 5) - ceRef(new Float32Array(m), t, 5)) / (2 * eps);
    assert.ok(Math.abs(num - g[i]) < 1e-4, `grad[${i}] ${g[i]} vs ${num}`);
  }
});

Deno.test("crossEntropyLoss: uniform logits give ln(V)", async () => {
  const be = new CpuBackend();
  const { loss } = crossEntropyLoss(be.zeros([4, 7]), ids(be, [4], 7, 3));
  assert.ok(Math.abs(await value(loss) - Math.log(7)) < 1e-6);
});

Deno.test("mseLoss: mean over all elements; gradient 2(p − t)/(N·C)", async () => {
  const be = new CpuBackend();
  const pred = uniform(be, [3, 4], 1), target = uniform(be, [3, 4], 2);
  const p = await pred.toArray(), t = await target.toArray();
  const { loss, grad } = mseLoss(pred, target);
  let ref = 0;
  for (let i = 0; i < 12; i++) ref += (p[i] - t[i]) ** 2;
  assert.ok(Math.abs(await value(loss) - ref / 12) < 1e-6);
  const g = await grad.toArray();
  for (let i = 0; i < 12; i++) assert.ok(Math.abs(g[i] - 2 * (p[i] - t[i]) / 12) < 1e-7);
});

// The documented rule: micro-batches of n rows pass totalRows = N; their partial losses and
// gradients add up to the full batch's, for unequal sizes too.
Deno.test("losses: unequal micro-batches (3 + 1 + 3 of 7 rows) add up to the full batch", async () => {
  const be = new CpuBackend();
  const sizes = [3, 1, 3];
  for (const kind of ["ce", "mse"] as const) {
    const pred = uniform(be, [7, 5], 11, -2, 2);
    const target = kind === "ce" ? ids(be, [7], 5, 12) : uniform(be, [7, 5], 12);
    const f = kind === "ce" ? crossEntropyLoss : mseLoss;
    const full = f(pred, target);
    let start = 0, lossSum = 0;
    const grads: Float32Array[] = [];
    for (const n of sizes) {
      const p = ops.sliceRows(pred, start, start + n), t = ops.sliceRows(target, start, start + n);
      const part = f(p, t, { totalRows: 7 });
      lossSum += await value(part.loss);
      grads.push(await part.grad.toArray());
      start += n;
    }
    assert.ok(Math.abs(lossSum - await value(full.loss)) < 1e-6, `${kind}: loss`);
    // Row by row the same arithmetic: the concatenated gradients equal the full one exactly.
    const cat = new Float32Array(35);
    let o = 0;
    for (const g of grads) {
      cat.set(g, o);
      o += g.length;
    }
    assert.deepEqual(cat, await full.grad.toArray(), `${kind}: gradient`);
    // The same micro-batches with the default (1/n) would be wrong: the rule matters.
    const wrong = f(ops.sliceRows(pred, 3, 4), ops.sliceRows(target, 3, 4));
    assert.notDeepEqual(await wrong.grad.toArray(), grads[1]);
  }
});

Deno.test("losses: parameter gradients of unequal micro-batches add up to the full-batch gradient", async () => {
  const be = new CpuBackend();
  const full = new Linear(be, 4, 6, { seed: 1 }), micro = new Linear(be, 4, 6, { seed: 1 });
  const x = uniform(be, [9, 4], 3), t = ids(be, [9], 6, 4);
  const y = full.forward(x);
  full.backward(crossEntropyLoss(y, t).grad);
  let start = 0;
  for (const [i, n] of [5, 2, 2].entries()) {
    const xs = ops.sliceRows(x, start, start + n), ts = ops.sliceRows(t, start, start + n);
    const ys = micro.forward(xs, { key: i });
    micro.backward(crossEntropyLoss(ys, ts, { totalRows: 9 }).grad, i);
    start += n;
  }
  const [a, b] = [full, micro].map((l) => l.parameters());
  for (let i = 0; i < a.length; i++) {
    assertNear(await b[i].grad.toArray(), await a[i].grad.toArray(), 1e-6, a[i].name);
  }
});

for (const be of backends) {
  Deno.test(`losses: ${label(be)} matches the CPU reference (tol 1e-5)`, async () => {
    const cpu = new CpuBackend({ exact: true });
    const l = lcgData(24, 5, -3, 3), t = new Float32Array([0, 5, 2, 1]);
    const cref = crossEntropyLoss(cpu.fromData(l, [4, 6]), cpu.fromData(t, [4]), { totalRows: 10 });
    const cgot = crossEntropyLoss(be.fromData(l, [4, 6]), be.fromData(t, [4]), { totalRows: 10 });
    assertNear(await cgot.loss.toArray(), await cref.loss.toArray(), 1e-5, "ce loss");
    assertNear(await cgot.grad.toArray(), await cref.grad.toArray(), 1e-5, "ce grad");
    const p = lcgData(24, 6), q = lcgData(24, 7);
    const ref = mseLoss(cpu.fromData(p, [4, 6]), cpu.fromData(q, [4, 6]));
    const got = mseLoss(be.fromData(p, [4, 6]), be.fromData(q, [4, 6]));
    assertNear(await got.loss.toArray(), await ref.loss.toArray(), 1e-5, "mse loss");
    assertNear(await got.grad.toArray(), await ref.grad.toArray(), 1e-5, "mse grad");
  });
}

Deno.test("losses: bad shapes and normalizers name the values", () => {
  const be = new CpuBackend();
  const logits = be.zeros([4, 3]);
  assertThrowsWith(() => crossEntropyLoss(logits, be.zeros([3])), RangeError, ["[3]", "[4, 3]"]);
  assertThrowsWith(
    () => crossEntropyLoss(logits, be.zeros([4]), { totalRows: 3 }),
    RangeError,
    ["totalRows", "4 rows", "got 3"],
  );
  assertThrowsWith(() => mseLoss(logits, be.zeros([4, 2])), RangeError, ["[4, 2]", "[4, 3]"]);
  assertThrowsWith(
    () => mseLoss(logits, be.zeros([4, 3]), { totalRows: 4.5 }),
    RangeError,
    ["totalRows", "4.5"],
  );
});
