/**
 * The CPU backend's pool of Float32Arrays (`CpuBackend.pool`,
 * `src/tensor/cpu/_array_pool.ts`): a disposed tensor's storage goes to the
 * next tensor of its size, zeroed where the op expects zeros, never while a
 * view still uses it, within `poolBytes`.
 */

import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import { ArrayPool } from "../../src/tensor/cpu/_array_pool.ts";

const N = 4096; // 16 KiB of f32: pooled (small arrays are not)

Deno.test("CpuBackend pool: a disposed tensor's storage serves the next one of its size, zeroed", async () => {
  const be = new CpuBackend({ exact: true });
  be.full([N], 7).dispose();
  assert.deepEqual(be.pool, { allocatedBytes: 4 * N, idleBytes: 4 * N, created: 1, reused: 0 });
  const z = be.zeros([64, 64]); // the same 4096 values, another shape
  assert.deepEqual(be.pool, { allocatedBytes: 4 * N, idleBytes: 0, created: 1, reused: 1 });
  assert.ok((await z.toArray()).every((v) => v === 0), "the reused storage was zeroed");
  // An op writing into reused storage: the stale values do not show.
  z.dispose();
  const a = be.fromData(new Float32Array(N).fill(1), [N]);
  assert.equal(be.pool.reused, 2);
  const s = ops.scale(a, 3);
  assert.ok((await s.toArray()).every((v) => v === 3));
  // Another size is new storage.
  be.zeros([N + 1]).dispose();
  assert.equal(be.pool.created, 3);
  a.dispose();
  s.dispose();
  assert.equal(be.memory.liveBytes, 0);
});

Deno.test("CpuBackend pool: storage a view still uses is not reused until every view is disposed", async () => {
  const be = new CpuBackend({ exact: true });
  const x = be.fromData(new Float32Array(N).map((_, i) => i), [N]);
  const v = x.reshape([64, 64]);
  x.dispose();
  const other = be.full([N], -1); // must not take x's storage: v still reads it
  assert.equal(be.pool.reused, 0);
  const seen = await v.toArray();
  assert.ok(seen.every((val, i) => val === i), "the view's values are intact");
  v.dispose(); // now the storage is free
  const y = be.zeros([N]);
  assert.equal(be.pool.reused, 1);
  assert.ok((await y.toArray()).every((val) => val === 0));
  other.dispose();
  y.dispose();
});

Deno.test("CpuBackend pool: what read and toArray return is a copy the pool never hands out", async () => {
  const be = new CpuBackend({ exact: true });
  const x = be.full([N], 5);
  const out = await x.toArray();
  const sync = x.tryToArraySync()!;
  x.dispose();
  be.full([N], 9).dispose(); // takes x's storage and overwrites it
  assert.ok(out.every((v) => v === 5) && sync.every((v) => v === 5));
});

Deno.test("CpuBackend pool: poolBytes bounds the idle storage, 0 keeps none, close drops it", () => {
  const none = new CpuBackend({ exact: true, poolBytes: 0 });
  none.zeros([N]).dispose();
  none.zeros([N]).dispose();
  assert.deepEqual(none.pool, { allocatedBytes: 0, idleBytes: 0, created: 2, reused: 0 });

  const be = new CpuBackend({ exact: true, poolBytes: 3 * 4 * N });
  const ts = Array.from({ length: 3 }, () => be.zeros([N]));
  for (const t of ts) t.dispose();
  assert.equal(be.pool.idleBytes, 3 * 4 * N, "three arrays fit");
  const big = be.zeros([2 * N]);
  big.dispose(); // over the limit: the idle arrays give way to it
  assert.equal(be.pool.idleBytes, 2 * 4 * N);
  assert.equal(be.pool.allocatedBytes, 2 * 4 * N);
  const huge = be.zeros([4 * N]); // larger than the limit: dropped when disposed
  huge.dispose();
  assert.equal(be.pool.idleBytes, 2 * 4 * N, "the idle arrays stay");
  assert.equal(be.pool.allocatedBytes, 2 * 4 * N);
  be.close();
  assert.equal(be.pool.idleBytes, 0);
});

Deno.test("CpuBackend: bad options are refused, naming the value and the rule", () => {
  for (const bad of [-1, 1.5, Number.NaN, Infinity]) {
    assert.throws(
      () => new CpuBackend({ poolBytes: bad as number }),
      (e: unknown) =>
        e instanceof RangeError && /poolBytes must be a non-negative integer/.test(e.message) &&
        e.message.includes(String(bad)),
    );
  }
  assert.throws(() => new CpuBackend(null as never), TypeError);
  assert.throws(
    () => new CpuBackend({ poolBytes: "64MiB" as unknown as number }),
    (e: unknown) =>
      e instanceof TypeError &&
      e.message.includes('poolBytes must be a number of bytes, got the string "64MiB"'),
  );
  assert.throws(() => new CpuBackend({ poolBytes: null as unknown as number }), TypeError);
  assert.throws(
    () => new CpuBackend({ poolbytes: 10 } as never),
    (e: unknown) =>
      e instanceof TypeError &&
      e.message.includes('unknown CpuBackend option "poolbytes"; did you mean "poolBytes"?'),
  );
});

Deno.test("ArrayPool: small and detached arrays are not kept", () => {
  const pool = new ArrayPool(1 << 20);
  const small = pool.acquire(16, true); // 64 bytes: on V8's heap, nothing to save
  pool.release(small);
  const big = pool.acquire(N, true);
  (big.buffer as ArrayBuffer).transfer(); // detaches it
  pool.release(big);
  assert.deepEqual(pool.stats, { allocatedBytes: 4 * N, idleBytes: 0, created: 1, reused: 0 });
  assert.equal(pool.acquire(16, true).length, 16);
});
