/**
 * Out-of-range integer inputs (embedding ids, cross-entropy targets) are
 * one RangeError on every backend, naming the op, the value, its position
 * and the valid range, thrown before any kernel runs or any state changes.
 * On WebGPU that holds for ids from host data (and views, copies, slices
 * and concatenations of them); ids computed on the device are checked by a
 * kernel and reported by the next read or sync.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend } from "../../src/tensor/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { WebGPUBackend } from "../../src/tensor/webgpu/mod.ts";
import { assertThrowsWith, lcgData, take } from "./_helpers.ts";
import { label, testBackends } from "./_backends.ts";

const backends = await testBackends();
const gpu = backends.find((b) => b.name === "webgpu") as WebGPUBackend | undefined;

function ids(be: Backend, values: number[], shape = [values.length]) {
  return be.fromData(Float32Array.from(values), shape);
}

const BAD: [number[], number, string][] = [
  [[1, 4, 0], 1, "got 4"],
  [[0, 1, -1], 2, "got -1"],
  [[2, 0.5], 1, "got 0.5"],
  [[3, NaN, 1], 1, "got NaN"],
  [[1, 2, 9, 8], 2, "got 9"],
];

Deno.test("embedding, its gradient and cross-entropy refuse bad integers the same way everywhere", async () => {
  for (const be of backends) {
    const table = be.fromData(lcgData(8, 1), [4, 2]);
    for (const [values, pos, got] of BAD) {
      const x = ids(be, values);
      const before = be.memory.liveBytes;
      const want = [`id at position ${pos} must be an integer in [0, 4)`, got];
      assertThrowsWith(() => ops.embedding(table, x), RangeError, ["embedding:", ...want]);
      const dTable = be.zeros([4, 2]);
      const dy = be.fromData(lcgData(values.length * 2, 2), [values.length, 2]);
      assertThrowsWith(
        () => ops.embeddingBackwardInPlace(dTable, x, dy),
        RangeError,
        ["embeddingBackwardInPlace:", ...want],
      );
      assert.ok((await dTable.toArray()).every((v) => v === 0), `${label(be)}: dTable unchanged`);
      const logits = be.fromData(lcgData(values.length * 4, 3), [values.length, 4]);
      const wantT = [`target at position ${pos} must be an integer in [0, 4)`, got];
      assertThrowsWith(() => ops.crossEntropy(logits, x), RangeError, ["crossEntropy:", ...wantT]);
      assertThrowsWith(
        () => ops.crossEntropyBackward(logits, x, 1),
        RangeError,
        ["crossEntropyBackward:", ...wantT],
      );
      for (const t of [dTable, dy, logits]) t.dispose();
      assert.equal(
        be.memory.liveBytes,
        before - 0,
        `${label(be)}: nothing allocated by the refusals`,
      );
      x.dispose();
      await be.sync(); // no error left pending
    }
    table.dispose();
  }
});

Deno.test("webgpu: views, copies, slices and concatenations of host ids are checked before any work", async () => {
  if (gpu === undefined) return;
  const table = gpu.fromData(lcgData(8, 1), [4, 2]);
  const base = ids(gpu, [0, 1, 2, 3, 7, 1], [3, 2]);
  const cases: [string, () => unknown, string][] = [
    ["reshape", () => ops.embedding(table, base.reshape([6])), "position 4"],
    ["copy", () => ops.embedding(table, ops.copy(base)), "position 4"],
    ["sliceRows", () => ops.embedding(table, ops.sliceRows(base, 1, 3)), "position 2"],
    ["concatRows", () => ops.embedding(table, ops.concatRows([base, base])), "position 4"],
  ];
  for (const [, call, pos] of cases) {
    assertThrowsWith(call, RangeError, ["embedding", pos, "got 7"]);
    await gpu.sync(); // synchronous refusal: nothing pending
  }
  // The valid part passes, through a slice of ids with a bad row elsewhere.
  const ok = ops.embedding(table, ops.sliceRows(base, 0, 2));
  assert.equal((await take(ok)).length, 8);
  // A float upload whose first entry is not an integer is known to be invalid at once.
  assertThrowsWith(() => ops.embedding(table, ids(gpu, [0.25, 1])), RangeError, [
    "position 0",
    "0.25",
  ]);
});

Deno.test("webgpu: ids computed or overwritten on the device are checked there and reported by the next read", async () => {
  if (gpu === undefined) return;
  const table = gpu.fromData(lcgData(8, 1), [4, 2]);
  // Valid device-computed ids: no error.
  const two = ops.scale(ids(gpu, [0, 1, 1]), 2); // [0, 2, 2]
  assert.equal((await take(ops.embedding(table, two))).length, 6);
  // Invalid ones: the op runs (NaN rows), the next read throws the RangeError.
  const big = ops.scale(ids(gpu, [0, 1, 3]), 2); // [0, 2, 6]
  const y = ops.embedding(table, big);
  await assert.rejects(
    () => y.toArray(),
    (e) =>
      e instanceof RangeError &&
      /embedding: id at position 2 must be an integer in \[0, 4\), got 6 \(found by a device check/
        .test(e.message),
  );
  await gpu.sync(); // reported once
  // Host ids overwritten in place lose their host record: checked on the device.
  const x = ids(gpu, [0, 1]);
  ops.fillInPlace(x, 5);
  ops.crossEntropy(gpu.fromData(lcgData(8, 2), [2, 4]), x);
  await assert.rejects(() => gpu.sync(), /crossEntropy: target at position 0 .* got 5/);
});
