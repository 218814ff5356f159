/**
 * The `Tensor` handle on its own: size, rows and cols of a shape, reshaped
 * views sharing one storage that the backend gets back exactly once (with
 * the last view), and every use after dispose refused. Backend-independent,
 * so it runs on the CPU reference; the ops' own after-dispose checks live in
 * ops_test.ts and the backends' byte accounting in their own suites.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import {
  checkShape,
  createTensor,
  shapeSize,
  Tensor,
  tensorStorage,
} from "../../src/tensor/tensor.ts";
import * as tensorModule from "../../src/tensor/mod.ts";
import type { Shape } from "../../src/tensor/backend.ts";

/** The CPU backend, recording every storage it is handed back. */
class RecordingBackend extends CpuBackend {
  readonly released: { storage: unknown; bytes: number }[] = [];
  override release(storage: unknown, bytes: number): void {
    this.released.push({ storage, bytes });
    super.release(storage, bytes);
  }
}

Deno.test("Tensor: size, rows (all dims but the last) and cols (the last dim)", () => {
  const be = new CpuBackend();
  const cases: [Shape, number, number, number][] = [
    // shape, size, rows, cols
    [[], 1, 1, 1],
    [[5], 5, 1, 5],
    [[2, 3], 6, 2, 3],
    [[2, 3, 4], 24, 6, 4],
    [[1, 7], 7, 1, 7],
    [[7, 1], 7, 7, 1],
    [[0, 4], 0, 0, 4],
    [[2, 0, 3], 0, 0, 3],
  ];
  for (const [shape, size, rows, cols] of cases) {
    const t = be.zeros(shape);
    const at = `[${shape.join(", ")}]`;
    assert.deepEqual(t.shape, shape, at);
    assert.equal(t.size, size, `${at}: size`);
    assert.equal(shapeSize(shape), size, `${at}: shapeSize`);
    assert.equal(t.rows, rows, `${at}: rows`);
    assert.equal(t.cols, cols, `${at}: cols`);
    assert.equal(t.bytes, 4 * size, `${at}: f32 bytes`);
    t.dispose();
  }
  assert.equal(be.memory.liveBytes, 0);
});

Deno.test("Tensor: the shape is a frozen copy of the caller's array", () => {
  const be = new CpuBackend();
  const shape = [2, 3];
  const t = be.zeros(shape);
  shape[0] = 9;
  assert.deepEqual(t.shape, [2, 3]);
  assert.ok(Object.isFrozen(t.shape));
  t.dispose();
});

Deno.test("Tensor.reshape: views share storage; the backend gets it back once, with the last view", async () => {
  const be = new RecordingBackend();
  const x = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
  const live = be.memory.liveBytes;
  const flat = x.reshape([6]);
  const cube = flat.reshape([3, 1, 2]);
  assert.equal(be.memory.liveBytes, live, "views allocate nothing");
  assert.equal(tensorStorage(flat), tensorStorage(x), "same storage");
  assert.equal(tensorStorage(cube), tensorStorage(x), "a view of a view: same storage");
  assert.deepEqual([cube.rows, cube.cols], [3, 2]);
  assert.deepEqual(await cube.toArray(), new Float32Array([1, 2, 3, 4, 5, 6]));

  // A write through the storage is seen by every view.
  (tensorStorage(x) as Float32Array)[0] = 42;
  assert.equal((await flat.toArray())[0], 42);

  x.dispose();
  flat.dispose();
  assert.equal(be.released.length, 0, "storage kept while a view lives");
  assert.ok(x.disposed && flat.disposed && !cube.disposed);
  assert.deepEqual(await cube.toArray(), new Float32Array([42, 2, 3, 4, 5, 6]));
  cube.dispose();
  assert.equal(be.released.length, 1, "released with the last view");
  assert.equal(be.released[0].bytes, 24);
  assert.equal(be.memory.liveBytes, 0);

  // Disposing twice (any handle) releases nothing more.
  x.dispose();
  cube.dispose();
  assert.equal(be.released.length, 1, "dispose is idempotent");
  assert.equal(be.memory.liveBytes, 0);
});

Deno.test("Tensor.reshape: a view of a disposed handle is refused even while other views live", () => {
  const be = new RecordingBackend();
  const x = be.zeros([4]);
  const v = x.reshape([2, 2]);
  x.dispose();
  assert.throws(
    () => x.reshape([4]),
    (e: Error) => e instanceof TypeError && /\[4\].*dispose/.test(e.message),
  );
  const w = v.reshape([1, 4]); // the live view still gives views
  v.dispose();
  assert.equal(be.released.length, 0);
  w.dispose();
  assert.equal(be.released.length, 1);
});

Deno.test("Tensor: every use after dispose is a TypeError naming the shape", async () => {
  const be = new CpuBackend();
  const t: Tensor = be.zeros([3, 5]);
  t.dispose();
  const named = (e: unknown) =>
    e instanceof TypeError && e.message.includes("[3, 5]") && /after dispose/.test(e.message);
  assert.throws(() => tensorStorage(t), named, "storage");
  assert.throws(() => t.reshape([15]), named, "reshape");
  assert.throws(() => t.toArray(), named, "toArray");
  // What the handle knew stays readable: it is metadata, not storage.
  assert.deepEqual([t.size, t.rows, t.cols, t.bytes], [15, 3, 5, 60]);
  assert.equal(t.disposed, true);
  await be.sync();
});

Deno.test("Tensor.reshape and checkShape: bad shapes name the shapes and the element counts", () => {
  const be = new CpuBackend();
  const x = be.zeros([2, 3]);
  assert.throws(
    () => x.reshape([5]),
    (e: Error) =>
      e instanceof RangeError &&
      e.message === "cannot reshape [2, 3] (6 elements) to [5] (5 elements)",
  );
  for (const bad of [[1.5, 4], [-1, -6], [Number.NaN]]) {
    assert.throws(
      () => x.reshape(bad),
      (e: Error) => e instanceof RangeError && e.message.includes(`[${bad.join(", ")}]`),
      `reshape to [${bad.join(", ")}]`,
    );
  }
  assert.throws(
    () => checkShape("2x3" as unknown as Shape, "input shape"),
    /input shape must be an array of dimensions, got "2x3"/,
  );
  assert.throws(() => checkShape([2, -1]), /shape must hold non-negative integers, got \[2, -1\]/);
  checkShape([]);
  checkShape([0, 3]);
  assert.equal(x.disposed, false, "a refused reshape leaves the tensor usable");
  x.dispose();
  assert.equal(be.memory.liveBytes, 0);
});

Deno.test("Tensor.rows is the product of all dimensions but the last, also when the last is 0", () => {
  const be = new CpuBackend();
  const t = be.zeros([3, 0]);
  assert.equal(t.rows, 3);
  assert.equal(t.cols, 0);
  const u = be.zeros([2, 0, 4]);
  assert.equal(u.rows, 0);
  t.dispose();
  u.dispose();
});

Deno.test("Tensor.tryToArraySync: a copy now on the CPU, null where only toArray can read", async () => {
  const be = new CpuBackend();
  const t = be.fromData(new Float32Array([1, 2, 3]), [3]);
  const now = t.tryToArraySync();
  assert.deepEqual(now, new Float32Array([1, 2, 3]));
  now![0] = 9; // a copy: the tensor is unchanged
  assert.deepEqual(await t.toArray(), new Float32Array([1, 2, 3]));
  // A backend without readSync (a device backend) gives null.
  const device = Object.assign(Object.create(be), { readSync: undefined });
  const d = createTensor(device, [1], new Float32Array([5]), 4);
  assert.equal(d.tryToArraySync(), null);
  t.dispose();
  assert.throws(() => t.tryToArraySync(), /used after dispose/);
});

Deno.test("Tensor internals: no public constructor and no storage property; the package exports neither helper", () => {
  const be = new CpuBackend();
  const Ctor = Tensor as unknown as new (...args: unknown[]) => Tensor;
  assert.throws(
    () => new Ctor(be, [1], new Float32Array(1), 4),
    (e) => e instanceof TypeError && /constructor is internal.*backend\.fromData/.test(e.message),
  );
  assert.equal(be.memory.liveBytes, 0, "nothing allocated by the refused call");
  const t = be.fromData(new Float32Array([1, 2]), [2]);
  assert.equal("storage" in t, false, "no storage member");
  assert.deepEqual(Object.keys(t).sort(), ["backend", "shape", "size"], "only the public fields");
  assert.ok(t instanceof Tensor);
  t.dispose();
  const names = Object.keys(tensorModule);
  assert.ok(names.includes("Tensor"));
  assert.equal(names.includes("createTensor"), false);
  assert.equal(names.includes("tensorStorage"), false);
});
