/**
 * Scoped disposal: `tidy` disposes the handles created inside except what
 * is returned or kept (also on throw, and across nested scopes), `using`
 * releases a tensor at the end of its block, and `LeakWatch` warns once
 * after k consecutive growths of live memory. A training step with layers
 * and an optimizer run inside `tidy` leaks nothing and keeps what backward
 * and the optimizer need.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { keep, tidy } from "../../src/tensor/tidy.ts";
import { LeakWatch } from "../../src/tensor/leak_watch.ts";
import { Linear } from "../../src/nn/linear.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { AdamW } from "../../src/nn/adamw.ts";
import { TokenPositionEmbedding } from "../../src/nn/token_position_embedding.ts";
import { crossEntropyLoss } from "../../src/nn/losses.ts";
import { assertThrowsWith } from "./_helpers.ts";
import { label, testBackends } from "./_backends.ts";

const backends = await testBackends();

Deno.test("tidy disposes temporaries and keeps the result: a tensor, arrays, objects, maps", async () => {
  for (const be of backends) {
    const base = be.memory.liveBytes;
    const x = be.fromData(Float32Array.of(1, 2, 3, 4), [4]);
    const y = tidy(() => ops.add(ops.mul(x, x), ops.scale(x, 2)));
    assert.deepEqual([...await y.toArray()], [3, 8, 15, 24]);
    assert.equal(be.memory.liveBytes - base, 32, `${label(be)}: x and y only`);
    const r = tidy(() => {
      const a = ops.scale(x, 3);
      const views = a.reshape([2, 2]);
      ops.exp(x); // dropped
      return { list: [a, ops.copy(x)], nested: { m: new Map([["v", views]]) }, n: 3 };
    });
    assert.equal(r.n, 3);
    assert.ok(!r.list[0].disposed && !r.list[1].disposed && !r.nested.m.get("v")!.disposed);
    assert.equal(
      be.memory.liveBytes - base,
      32 + 32,
      `${label(be)}: a (shared with its view) and the copy`,
    );
    for (const t of [x, y, ...r.list, r.nested.m.get("v")!]) t.dispose();
    assert.equal(be.memory.liveBytes, base);
  }
});

Deno.test("tidy: nested scopes hand results outward; keep() exempts; a throw disposes everything", () => {
  const be = new CpuBackend();
  let inner: Tensor | null = null, kept: Tensor | null = null;
  const outer = tidy(() => {
    inner = tidy(() => ops.full(be, [2], 1));
    kept = keep(ops.full(be, [2], 2));
    ops.full(be, [2], 3); // dropped by the outer scope
    return ops.add(inner, inner);
  });
  assert.ok(
    inner!.disposed,
    "the inner result belonged to the outer scope, which did not return it",
  );
  assert.ok(!kept!.disposed && !outer.disposed);
  assert.equal(be.memory.liveBytes, 16);
  assert.throws(() =>
    tidy(() => {
      ops.full(be, [100], 0);
      throw new Error("boom");
    }), /boom/);
  assert.equal(be.memory.liveBytes, 16, "what the failed scope created is gone");
  assertThrowsWith(() => tidy(() => Promise.resolve(ops.full(be, [1], 0))), TypeError, [
    "tidy",
    "synchronous",
  ]);
  assertThrowsWith(() => tidy(3 as unknown as () => void), TypeError, ["tidy", "number"]);
  assertThrowsWith(() => keep({} as Tensor), TypeError, ["keep", "Tensor"]);
});

Deno.test("using releases tensors at the end of their block", () => {
  for (const be of backends) {
    const base = be.memory.liveBytes;
    {
      using a = be.zeros([64]);
      using b = ops.scale(a, 2);
      assert.equal(be.memory.liveBytes - base, 512);
      assert.ok(!b.disposed);
    }
    assert.equal(be.memory.liveBytes, base, label(be));
  }
});

Deno.test("a training step inside tidy leaks nothing; forward in tidy, backward outside still works", () => {
  for (const be of backends) {
    const model = new Sequential([
      new TokenPositionEmbedding(be, 11, 4, 8),
      new Linear(be, 8, 16, { seed: 1 }),
      new ReLU(be),
      new Linear(be, 16, 11, { seed: 2 }),
    ]);
    const opt = new AdamW(model.parameters(), { lr: 1e-2 });
    const ids = be.fromData(Float32Array.from({ length: 8 }, (_, i) => (i * 3) % 11), [2, 4]);
    const targets = be.fromData(Float32Array.from({ length: 8 }, (_, i) => (i * 5) % 11), [8]);
    const warnings: string[] = [];
    const watch = new LeakWatch(be.memory, { patience: 2, warn: (m) => warnings.push(m) });
    const live: number[] = [];
    for (let step = 0; step < 4; step++) {
      tidy(() => {
        model.zeroGrad();
        const logits = model.forward(ids, { key: "s" });
        const { grad } = crossEntropyLoss(logits.reshape([8, 11]), targets);
        model.backward(grad.reshape([2, 4, 11]), "s");
        opt.step();
      });
      live.push(be.memory.liveBytes);
      watch.check(step);
    }
    // Step 0 creates the optimizer moments and the position cache; then flat.
    assert.equal(live[1], live[3], `${label(be)}: live bytes per step ${live}`);
    assert.deepEqual(warnings, []);
    // State saved by a forward inside tidy survives for a backward outside.
    const y = tidy(() => model.forward(ids, { key: "late" }));
    const dx = model.backward(ops.ones(be, y.shape), "late");
    assert.equal(dx.shape.length, 2);
    assert.deepEqual(model.heldKeys(), []);
    model.dispose();
  }
});

Deno.test("LeakWatch warns once after k consecutive growths, naming the bytes; a flat step resets", () => {
  const be = new CpuBackend();
  const warnings: string[] = [];
  const watch = new LeakWatch(be.memory, { patience: 3, warn: (m) => warnings.push(m) });
  const keepAlive: Tensor[] = [];
  const grow = () => keepAlive.push(be.zeros([25])); // 100 bytes
  watch.check(0);
  grow();
  watch.check(1);
  grow();
  watch.check(2); // 2 growths
  watch.check(3); // flat: count restarts
  assert.equal(watch.growths, 0);
  assert.deepEqual(warnings, []);
  for (let s = 4; s < 10; s++) {
    grow();
    const warned = watch.check(s);
    assert.equal(warned, s === 6, `step ${s}`);
  }
  assert.equal(warnings.length, 1);
  assert.match(
    warnings[0],
    /grew 3 steps in a row \(to step 6\), from 200 to 500 bytes \(\+300 bytes, about 100 per step\)/,
  );
  watch.reset();
  watch.check(10);
  for (let s = 11; s < 14; s++) {
    grow();
    watch.check(s);
  }
  assert.equal(warnings.length, 2, "warns again after reset");
  assertThrowsWith(() => new LeakWatch(be.memory, { patience: 0 }), RangeError, ["patience", "0"]);
  assertThrowsWith(() => new LeakWatch(null as unknown as CpuBackend["memory"]), TypeError, [
    "memory",
  ]);
  // Default sink: console.warn.
  const orig = console.warn;
  const seen: string[] = [];
  console.warn = (m: string) => void seen.push(m);
  try {
    const w = new LeakWatch(be.memory, { patience: 1 });
    w.check();
    grow();
    w.check();
  } finally {
    console.warn = orig;
  }
  assert.equal(seen.length, 1);
});
