/**
 * `ops.dropout` on every backend: the mask is the documented hash of
 * (seed, step, global element index), the same for a whole batch and for
 * its micro-batches run with their `rowOffset`, the same on every backend
 * bit for bit, new each step; about a fraction p is dropped and kept
 * elements are scaled by exactly f32(1 / (1 − p)).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend, Shape } from "../../src/tensor/backend.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import { assertThrowsWith, lcgData, take } from "./_helpers.ts";
import { label, testBackends } from "./_backends.ts";

const backends = await testBackends();

function size(shape: Shape): number {
  return shape.reduce((a, b) => a * b, 1);
}

// The hash as documented in src/tensor/_dropout_hash.ts, written out again
// here with BigInt arithmetic (mod 2^32), independently of the library.
const M32 = (1n << 32n) - 1n;
function pcg(v: bigint): bigint {
  const state = (v * 747796405n + 2891336453n) & M32;
  const word = (((state >> ((state >> 28n) + 4n)) ^ state) * 277803737n) & M32;
  return ((word >> 22n) ^ word) & M32;
}
function dropped(seed: number, step: number, index: number, p: number): boolean {
  const key = pcg(pcg(BigInt(seed)) ^ BigInt(step));
  const h = pcg((pcg((BigInt(index) & M32) ^ key) + key) & M32);
  return h < BigInt(Math.min(0xffffffff, Math.floor(p * 2 ** 32)));
}

Deno.test("dropout: the mask is the documented hash of (seed, step, global index), scale f32(1/(1-p))", async () => {
  for (const be of backends) {
    const shape = [6, 7], X = lcgData(42, 1, -2, 2);
    for (const [p, seed, step, rowOffset] of [[0.5, 1, 0, 0], [0.3, 0xffffffff, 17, 1000]]) {
      const y = await take(ops.dropout(be.fromData(X, shape), { p, seed, step, rowOffset }));
      const scale = Math.fround(1 / (1 - p));
      for (let i = 0; i < X.length; i++) {
        const want = dropped(seed, step, rowOffset * 7 + i, p)
          ? X[i] * 0
          : Math.fround(X[i] * scale);
        assert.ok(Object.is(y[i], want), `${label(be)} p ${p}: y[${i}] = ${y[i]}, want ${want}`);
      }
    }
  }
});

Deno.test("dropout: micro-batches with their rowOffset drop what the whole batch drops", async () => {
  for (const be of backends) {
    for (
      const [shape, splits] of [[[8, 5], [3, 1, 4]], [[6, 3, 4], [2, 2, 2]], [[5], [1, 4]]] as [
        Shape,
        number[],
      ][]
    ) {
      const X = lcgData(size(shape), 2, -1, 1);
      const opts = { p: 0.4, seed: 42, step: 9 };
      const whole = await take(ops.dropout(be.fromData(X, shape), opts));
      const inner = size(shape.slice(1));
      let row = 0;
      const parts: number[] = [];
      for (const rows of splits) {
        const part = be.fromData(X.subarray(row * inner, (row + rows) * inner), [
          rows,
          ...shape.slice(1),
        ]);
        parts.push(...await take(ops.dropout(part, { ...opts, rowOffset: row })));
        part.dispose();
        row += rows;
      }
      assert.deepEqual(parts, [...whole], `${label(be)} [${shape}] split ${splits}`);
    }
  }
});

Deno.test("dropout: every backend drops exactly the CPU's elements", async () => {
  const cpu = new CpuBackend();
  const shape = [37, 11], X = lcgData(size(shape), 3, -1, 1);
  const opts = { p: 0.25, seed: 5, step: 2, rowOffset: 3 };
  const want = await take(ops.dropout(cpu.fromData(X, shape), opts));
  for (const be of backends) {
    const got = await take(ops.dropout(be.fromData(X, shape), opts));
    for (let i = 0; i < want.length; i++) {
      assert.ok(Object.is(got[i], want[i]), `${label(be)}[${i}]: ${got[i]} vs cpu ${want[i]}`);
    }
  }
});

async function mask(
  be: Backend,
  shape: Shape,
  p: number,
  seed: number,
  step: number,
): Promise<boolean[]> {
  const y = await take(ops.dropout(ops.ones(be, shape), { p, seed, step }));
  return [...y].map((v) => v === 0);
}

Deno.test("dropout: about p dropped, a new mask per step and per seed, p = 0 is the identity", async () => {
  for (const be of backends) {
    const n = 100_000;
    for (const p of [0.1, 0.5, 0.9]) {
      const m = await mask(be, [n], p, 3, 1);
      const frac = m.filter((d) => d).length / n;
      // 5 standard deviations of a binomial proportion.
      assert.ok(
        Math.abs(frac - p) < 5 * Math.sqrt(p * (1 - p) / n),
        `${label(be)} p ${p}: ${frac}`,
      );
    }
    const a = await mask(be, [1000], 0.5, 3, 1), b = await mask(be, [1000], 0.5, 3, 2);
    const c = await mask(be, [1000], 0.5, 4, 1), again = await mask(be, [1000], 0.5, 3, 1);
    const agree = (u: boolean[], v: boolean[]) => u.filter((d, i) => d === v[i]).length / u.length;
    assert.deepEqual(a, again, "same seed and step, same mask");
    assert.ok(agree(a, b) < 0.6 && agree(a, c) < 0.6, `${label(be)}: masks independent-looking`);
    const X = lcgData(10, 4, -1, 1);
    X[3] = NaN;
    const y = await take(ops.dropout(be.fromData(X, [10]), { p: 0, seed: 1 }));
    assert.ok(y.every((v, i) => Object.is(v, X[i])), `${label(be)}: p = 0 returns x`);
  }
});

Deno.test("dropout: bad p, seed, step or rowOffset are RangeErrors naming the value", () => {
  const be = new CpuBackend();
  const x = be.zeros([2, 2]);
  assertThrowsWith(() => ops.dropout(x, { p: 1, seed: 0 }), RangeError, ["p", "[0, 1)", "1"]);
  assertThrowsWith(() => ops.dropout(x, { p: -0.1, seed: 0 }), RangeError, ["p", "-0.1"]);
  assertThrowsWith(() => ops.dropout(x, { p: 0.5, seed: -1 }), RangeError, ["seed", "-1"]);
  assertThrowsWith(() => ops.dropout(x, { p: 0.5, seed: 2 ** 32 }), RangeError, [
    "seed",
    "4294967296",
  ]);
  assertThrowsWith(() => ops.dropout(x, { p: 0.5, seed: 1, step: 1.5 }), RangeError, [
    "step",
    "1.5",
  ]);
  assertThrowsWith(() => ops.dropout(x, { p: 0.5, seed: 1, rowOffset: -2 }), RangeError, [
    "rowOffset",
    "-2",
  ]);
  assertThrowsWith(
    () => ops.dropout(x, null as unknown as { p: number; seed: number }),
    TypeError,
    ["opts"],
  );
});
