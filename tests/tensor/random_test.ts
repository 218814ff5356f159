import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { randomTensor, Rng } from "../../src/tensor/random.ts";
import { assertThrowsWith } from "./_helpers.ts";
import { testBackends } from "./_backends.ts";

const backends = await testBackends();

function draw(rng: Rng, n: number, f: (r: Rng) => number): number[] {
  return Array.from({ length: n }, () => f(rng));
}

Deno.test("Rng: the same seed gives the same stream", () => {
  for (const seed of [0, 1, 42, -7, 2 ** 40 + 3]) {
    assert.deepEqual(
      draw(new Rng(seed), 50, (r) => r.next()),
      draw(new Rng(seed), 50, (r) => r.next()),
    );
    assert.deepEqual(
      draw(new Rng(seed), 50, (r) => r.normal()),
      draw(new Rng(seed), 50, (r) => r.normal()),
    );
  }
});

Deno.test("Rng: different seeds give different streams, including seeds differing above bit 32", () => {
  const streams = [0, 1, 2, 2 ** 32, 2 ** 33, -1].map((s) =>
    draw(new Rng(s), 8, (r) => r.nextUint32()).join(",")
  );
  assert.equal(new Set(streams).size, streams.length);
});

Deno.test("Rng.next: values in [0, 1) with mean ~1/2 and variance ~1/12", () => {
  const rng = new Rng(123);
  const n = 100_000;
  let s = 0, s2 = 0;
  for (let i = 0; i < n; i++) {
    const u = rng.next();
    assert.ok(u >= 0 && u < 1, `out of range: ${u}`);
    s += u;
    s2 += u * u;
  }
  const mean = s / n, v = s2 / n - mean * mean;
  // Standard error of the mean is ~0.0009; of the variance ~0.0003.
  assert.ok(Math.abs(mean - 0.5) < 0.005, `mean ${mean}`);
  assert.ok(Math.abs(v - 1 / 12) < 0.002, `variance ${v}`);
});

Deno.test("Rng.normal: mean ~0, variance ~1, about 68% within one sigma", () => {
  const rng = new Rng(7);
  const n = 100_000;
  let s = 0, s2 = 0, within = 0;
  for (let i = 0; i < n; i++) {
    const z = rng.normal();
    assert.ok(Number.isFinite(z));
    s += z;
    s2 += z * z;
    if (Math.abs(z) < 1) within++;
  }
  const mean = s / n, v = s2 / n - mean * mean;
  assert.ok(Math.abs(mean) < 0.015, `mean ${mean}`);
  assert.ok(Math.abs(v - 1) < 0.02, `variance ${v}`);
  assert.ok(Math.abs(within / n - 0.6827) < 0.01, `fraction within 1 sigma ${within / n}`);
});

Deno.test("Rng.int: integers in [0, n), every value drawn about equally often", () => {
  const rng = new Rng(99);
  const n = 7, draws = 70_000;
  const counts = new Array(n).fill(0);
  for (let i = 0; i < draws; i++) {
    const k = rng.int(n);
    assert.ok(Number.isInteger(k) && k >= 0 && k < n, `out of range: ${k}`);
    counts[k]++;
  }
  for (const c of counts) assert.ok(Math.abs(c - draws / n) < 400, `counts ${counts}`);
  assert.equal(new Rng(1).int(1), 0);
});

Deno.test("Rng: bad seeds and bounds are refused with the value", () => {
  assertThrowsWith(() => new Rng(1.5), RangeError, ["seed", "1.5"]);
  assertThrowsWith(() => new Rng(NaN), RangeError, ["seed", "NaN"]);
  assertThrowsWith(() => new Rng(2 ** 60), RangeError, ["seed"]);
  const rng = new Rng(1);
  assertThrowsWith(() => rng.int(0), RangeError, ["n", "got 0"]);
  assertThrowsWith(() => rng.int(-3), RangeError, ["got -3"]);
  assertThrowsWith(() => rng.int(2.5), RangeError, ["got 2.5"]);
});

Deno.test("randomTensor: shape, determinism, scale, and one stream in row-major order", async () => {
  for (const be of backends) {
    const a = randomTensor(be, [3, 5], new Rng(5));
    const b = randomTensor(be, [3, 5], new Rng(5));
    const c = randomTensor(be, [3, 5], new Rng(5), 2);
    assert.deepEqual(a.shape, [3, 5]);
    const [da, db, dc] = await Promise.all([a.toArray(), b.toArray(), c.toArray()]);
    assert.deepEqual(da, db);
    const ref = new Rng(5);
    for (let i = 0; i < 15; i++) {
      assert.equal(da[i], Math.fround(ref.normal()));
      assert.equal(dc[i], Math.fround(da[i] * 2));
    }
    for (const t of [a, b, c]) t.dispose();
  }
});

Deno.test("randomTensor: the same seed gives the same data on every backend", async () => {
  const data = await Promise.all(
    backends.map(async (be) => {
      const t = randomTensor(be, [4, 7], new Rng(11), 0.5);
      const d = await t.toArray();
      t.dispose();
      return d;
    }),
  );
  for (const d of data) assert.deepEqual(d, data[0]);
});

Deno.test("randomTensor: bad shape, scale or rng are refused before allocating", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => randomTensor(be, [2, -1], new Rng(1)), RangeError, ["[2, -1]"]);
  assertThrowsWith(() => randomTensor(be, [2.5], new Rng(1)), RangeError, ["[2.5]"]);
  assertThrowsWith(() => randomTensor(be, [2], new Rng(1), NaN), RangeError, ["scale", "NaN"]);
  assertThrowsWith(() => randomTensor(be, [2], {} as Rng), TypeError, ["rng"]);
  assert.equal(be.memory.liveBytes, 0);
});
