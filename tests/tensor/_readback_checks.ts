// The read-path checks of tests/tensor/webgpu_readback_test.ts, run on the
// main thread and inside a worker (tests/tensor/_readback_worker.ts). Each
// check throws on failure; `runReadbackChecks` returns what ran.

import assert from "node:assert/strict";
import { WebGPUBackend } from "../../src/tensor/webgpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import { createStagingBuffer, mapRead } from "../../src/tensor/webgpu/_readback.ts";

const SIZES = [1, 3, 1024, 16384, (1 << 18) + 3];

function data(n: number, seed: number): Float32Array {
  return new Float32Array(n).map((_, i) => ((i * 7919 + seed) % 1013) / 7 - 50);
}

/**
 * A stand-in for a GPU buffer whose map completes only when its promise
 * settles, as where the wait is not done within the `mapAsync()` call:
 * `getMappedRange()` throws Deno's `OperationError` until then.
 */
export class LateBuffer {
  mapped = false;
  maps = 0;
  ranges = 0;
  unmaps = 0;
  rangesBeforeMapped = 0;
  constructor(readonly bytes: Uint8Array, readonly failWith?: Error) {}
  mapAsync(): Promise<void> {
    this.maps++;
    return new Promise((resolve) =>
      setTimeout(() => {
        this.mapped = true;
        resolve();
      }, 2)
    );
  }
  getMappedRange(offset = 0, size?: number): ArrayBuffer {
    this.ranges++;
    if (this.failWith !== undefined) throw this.failWith;
    if (!this.mapped) {
      this.rangesBeforeMapped++;
      throw new DOMException("Buffer is not mapped", "OperationError");
    }
    const end = size === undefined ? this.bytes.length : offset + size;
    return this.bytes.slice(offset, end).buffer;
  }
  unmap(): void {
    this.unmaps++;
    this.mapped = false;
  }
}

/** The fallback: a map not done within the call is awaited, then read. */
export async function checkLateMapFallback(): Promise<void> {
  const src = new Float32Array([1, 2, 3, 4]);
  const late = new LateBuffer(new Uint8Array(src.buffer));
  const buffer = late as unknown as GPUBuffer;
  const got = mapRead(buffer, 16, "immediate", (range) => new Float32Array(range(0, 16)));
  assert.ok(got instanceof Promise, "a map not done within the call gives a promise");
  assert.deepEqual(await got, src);
  assert.equal(late.maps, 1, "mapped once");
  assert.equal(late.unmaps, 1, "unmapped once, after the data was taken");
  // The awaiting path never touches the range before the promise settles.
  const awaited = new LateBuffer(new Uint8Array(src.buffer));
  const p = mapRead(awaited as unknown as GPUBuffer, 16, "awaited", (r) => r(0, 16));
  assert.ok(p instanceof Promise);
  await p;
  assert.equal(awaited.rangesBeforeMapped, 0);
  assert.equal(awaited.unmaps, 1);
  // Any other error of getMappedRange is the caller's, at once.
  const broken = new LateBuffer(new Uint8Array(16), new TypeError("broken range"));
  assert.throws(
    () => mapRead(broken as unknown as GPUBuffer, 16, "immediate", (r) => r(0, 16)),
    /broken range/,
  );
}

/** Reads, readSync, sync, marks and device checks on one path. */
export async function checkReads(path: "auto" | "awaited"): Promise<string> {
  const be = await WebGPUBackend.create({ matmul: "default", readPath: path });
  try {
    const immediate = be.readPath === "immediate";
    if (path === "awaited") assert.equal(be.readPath, "awaited");
    // Twice: right after creation, and once the staging buffers' first maps
    // have settled (Deno then copies mapped ranges itself; see _readback.ts).
    const kept: [Float32Array, Float32Array][] = [];
    for (const round of [0, 1]) {
      if (round === 1) await new Promise((r) => setTimeout(r, 40));
      for (const [i, n] of SIZES.entries()) {
        const x = be.fromData(data(n, i), [n]);
        const y = ops.scale(x, 2);
        const want = data(n, i).map((v) => v * 2);
        const got = await y.toArray();
        assert.deepEqual(got, want, `toArray of ${n} floats (round ${round})`);
        kept.push([got, want]);
        const now = y.tryToArraySync();
        if (immediate) assert.deepEqual(now, want, `tryToArraySync of ${n} floats`);
        else assert.equal(now, null);
        x.dispose();
        y.dispose();
      }
    }
    // What a read returned stays the caller's: later reads and unmaps leave it whole.
    for (const [got, want] of kept) assert.deepEqual(got, want);
    // Concurrent reads each get their own data.
    const ts = [3, 5, 7].map((k) => ops.scale(be.fromData(data(100, k), [100]), k));
    const all = await Promise.all(ts.map((t) => t.toArray()));
    all.forEach((d, j) =>
      assert.deepEqual(d, data(100, [3, 5, 7][j]).map((v) => v * [3, 5, 7][j]))
    );
    for (const t of ts) t.dispose();
    // Marks settle once a later sync has drained the queue; they increase.
    const m1 = be.timeMark();
    const z = ops.scale(be.fromData(data(4096, 9), [4096]), 3);
    const m2 = be.timeMark();
    await be.sync();
    if (m1 !== undefined && m2 !== undefined) {
      const [a, b] = await Promise.all([m1, m2]);
      assert.ok(b >= a, `marks ${a} then ${b}`);
      assert.ok(Number.isFinite(be.hostMinusDevice()), "host time calibrated");
      // After marks are in use, reads carry a stamp and still give exact data.
      assert.deepEqual(await z.toArray(), data(4096, 9).map((v) => v * 3));
    }
    z.dispose();
    // A device check (ids computed on the device) is reported by the next read.
    const table = be.fromData(data(8, 1), [4, 2]);
    const big = ops.scale(be.fromData(new Float32Array([0, 1, 3]), [3]), 2); // [0, 2, 6]
    const e = ops.embedding(table, big);
    await assert.rejects(() => e.toArray(), /id at position 2 must be an integer in \[0, 4\)/);
    for (const t of [table, big, e]) t.dispose();
    return be.readPath;
  } finally {
    await be.close();
  }
}

/** Every check; the read paths they ran on. */
export async function runReadbackChecks(): Promise<string[]> {
  await checkLateMapFallback();
  // A staging buffer made for reading maps and reads without a prior map.
  const be = await WebGPUBackend.create({ matmul: "default" });
  const s = createStagingBuffer(be.device, 16);
  assert.equal(s.mapState, "unmapped");
  s.destroy();
  await be.close();
  return [await checkReads("auto"), await checkReads("awaited")];
}
