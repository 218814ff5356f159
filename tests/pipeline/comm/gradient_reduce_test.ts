import assert from "node:assert/strict";
import {
  averageGradients,
  BucketAverage,
  packBucket,
  planBuckets,
  unpackBucket,
} from "../../../src/pipeline/comm/gradient_reduce.ts";
import { Rng } from "../../../src/tensor/random.ts";

const seg = (b: { segments: readonly { param: number; start: number; end: number }[] }) =>
  b.segments.map((s) => [s.param, s.start, s.end]);

Deno.test("planBuckets: parameters end to end, cut every floor(bytes / 4) values (hand-computed)", () => {
  // 10 bytes hold 2 values; parameter 1 is empty and appears nowhere.
  const plan = planBuckets([3, 0, 1, 4], 10);
  assert.deepEqual(plan.map(seg), [
    [[0, 0, 2]],
    [[0, 2, 3], [2, 0, 1]],
    [[3, 0, 2]],
    [[3, 2, 4]],
  ]);
  assert.deepEqual(plan.map((b) => [b.length, b.bytes]), [[2, 8], [2, 8], [2, 8], [2, 8]]);
  // One bucket when everything fits; the last bucket holds the rest.
  assert.deepEqual(planBuckets([3, 2], 1 << 20).map(seg), [[[0, 0, 3], [1, 0, 2]]]);
  assert.deepEqual(planBuckets([5], 12).map((b) => b.length), [3, 2]);
  assert.deepEqual(planBuckets([], 64), []);
  assert.deepEqual(planBuckets([0, 0], 64), []);
  // Every value of every parameter exactly once, in order.
  const sizes = [7, 1, 13, 0, 5];
  const seen = sizes.map((n) => new Array<number>(n).fill(0));
  let last = [-1, 0];
  for (const b of planBuckets(sizes, 24)) {
    assert.ok(b.bytes <= 24);
    for (const s of b.segments) {
      assert.ok(s.param > last[0] || (s.param === last[0] && s.start === last[1]));
      for (let i = s.start; i < s.end; i++) seen[s.param][i]++;
      last = [s.param, s.end];
    }
  }
  assert.ok(seen.every((a) => a.every((c) => c === 1)));
});

Deno.test("planBuckets: refuses bad sizes and bucket bytes, naming them", () => {
  assert.throws(
    () => planBuckets([3, -1], 16),
    /sizes\[1\] must be a non-negative integer, got -1/,
  );
  assert.throws(() => planBuckets([2.5], 16), RangeError);
  assert.throws(() => planBuckets([3], 3), /bucketBytes must be an integer >= 4.*got 3/);
  assert.throws(() => planBuckets([3], 8.5), RangeError);
  assert.throws(() => planBuckets("3" as unknown as number[], 8), TypeError);
});

Deno.test("packBucket / unpackBucket: round trip over a parameter cut in two", () => {
  const grads = [new Float32Array([1, 2, 3]), new Float32Array([4, 5])];
  const plan = planBuckets([3, 2], 8);
  assert.deepEqual(plan.map((b) => [...packBucket(b, grads)]), [[1, 2], [3, 4], [5]]);
  const back = [new Float32Array(3), new Float32Array(2)];
  for (const b of plan) unpackBucket(b, packBucket(b, grads), back);
  assert.deepEqual(back.map((g) => [...g]), [[1, 2, 3], [4, 5]]);
  assert.throws(() => packBucket(plan[1], [grads[0]]), /grads\[1\] must be a Float32Array/);
  assert.throws(() => unpackBucket(plan[0], new Float32Array(3), back), /2 values, got 3/);
});

Deno.test("packBucket into a given buffer: overwrites it whole and returns it; a buffer of another length is refused before any write", () => {
  const plan = planBuckets([3, 2], 8);
  const into = new Float32Array([9, 9]);
  const got = packBucket(plan[1], [new Float32Array([1, 2, 3]), new Float32Array([4, 5])], into);
  assert.equal(got, into);
  assert.deepEqual([...into], [3, 4]);
  const short = new Float32Array([7]);
  assert.throws(
    () => packBucket(plan[1], [new Float32Array([1, 2, 3]), new Float32Array([4, 5])], short),
    /into must be a Float32Array of the bucket's 2 values, got 1/,
  );
  assert.deepEqual([...short], [7]);
});

Deno.test("BucketAverage: hand-computed averages; refuses a bad replica, length or duplicate", () => {
  const avg = new BucketAverage(3, 3);
  assert.equal(avg.add(1, new Float32Array([2, -1, 0.5])), false);
  assert.throws(() => avg.result(), /missing \[0, 2\]/);
  assert.throws(() => avg.add(1, new Float32Array(3)), /already added/);
  assert.throws(() => avg.add(3, new Float32Array(3)), /\[0, 3\), got 3/);
  assert.throws(() => avg.add(0, new Float32Array(2)), /3 values, got 2/);
  avg.add(0, new Float32Array([1, 1, 1]));
  assert.equal(avg.add(2, new Float32Array([0, 3, 1])), true);
  // (1 + 2 + 0) / 3 = 1; (1 − 1 + 3) / 3 = 1; (1 + 0.5 + 1) / 3 = 2.5 / 3 rounded to f32 once.
  assert.deepEqual([...avg.result()], [1, 1, Math.fround(2.5 / 3)]);
  assert.throws(() => new BucketAverage(0, 1), RangeError);
  // One replica: the average is its own buffer, bit for bit.
  const one = new BucketAverage(1, 2);
  one.add(0, new Float32Array([0.1, -7]));
  assert.deepEqual([...one.result()], [Math.fround(0.1), -7]);
});

function randomGrads(rng: Rng, sizes: number[]): Float32Array[] {
  // Values over many magnitudes and both signs, so the order of a float32 sum would matter.
  return sizes.map((n) =>
    Float32Array.from(
      { length: n },
      () => (rng.next() - 0.5) * 10 ** Math.floor(rng.next() * 8 - 4),
    )
  );
}

function shuffled(rng: Rng, n: number): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

Deno.test("BucketAverage: the same bits whatever order the replicas' buffers arrive in", () => {
  const rng = new Rng(11);
  let arrivalOrderDiffers = false;
  for (const d of [2, 3, 5, 8]) {
    // Values of all sizes, and in every other column a huge value and its
    // negation on two replicas: even a float64 sum depends on its order there.
    const parts = Array.from(
      { length: d },
      () =>
        Float32Array.from({ length: 257 }, () => (rng.next() - 0.5) * 10 ** (rng.next() * 8 - 4)),
    );
    for (let i = 0; i < 257; i += 2) {
      const big = Math.fround(1e30 * (rng.next() + 0.5));
      const [a, b] = shuffled(rng, d);
      parts[a][i] = big;
      parts[b][i] = -big;
    }
    let want: Uint32Array | null = null;
    for (let trial = 0; trial < 6; trial++) {
      const order = shuffled(rng, d);
      const avg = new BucketAverage(d, 257);
      for (const k of order) avg.add(k, parts[k]);
      const bits = new Uint32Array(avg.result().buffer);
      if (want === null) want = bits;
      else assert.deepEqual(bits, want, `D ${d}, trial ${trial}`);
      // A sum taken in arrival order would not give these bits: the test can tell.
      const naive = Float32Array.from({ length: 257 }, (_, i) => {
        let s = 0;
        for (const k of order) s += parts[k][i];
        return s / d;
      });
      if (naive.some((v, i) => v !== avg.result()[i])) arrivalOrderDiffers = true;
    }
  }
  assert.ok(arrivalOrderDiffers, "the arrival orders drawn never change an arrival-order sum");
});

Deno.test("averageGradients: equals a float64 reference within 1e-6 relative, the same for any bucket size", () => {
  const rng = new Rng(3);
  const sizes = [37, 1, 0, 300, 64];
  for (const d of [2, 3, 4, 7]) {
    const replicas = Array.from({ length: d }, () => randomGrads(rng, sizes));
    const before = replicas.map((r) => r.map((g) => g.slice()));
    const got = averageGradients(replicas, 64);
    sizes.forEach((n, p) => {
      for (let i = 0; i < n; i++) {
        let ref = 0;
        for (let k = 0; k < d; k++) ref += replicas[k][p][i];
        ref /= d;
        const err = Math.abs(got[p][i] - ref);
        assert.ok(
          err <= 1e-6 * Math.abs(ref) || err === 0,
          `D ${d} p ${p}[${i}]: ${got[p][i]} vs ${ref}`,
        );
      }
    });
    // The inputs are left alone, and the bucket size changes no bit.
    assert.deepEqual(replicas, before);
    for (const bytes of [4, 12, 1 << 16]) {
      assert.deepEqual(averageGradients(replicas, bytes), got, `D ${d}, ${bytes} bytes a bucket`);
    }
  }
});

Deno.test("averageGradients: refuses replicas whose gradients differ in count or size", () => {
  const a = [new Float32Array(2), new Float32Array(3)];
  assert.throws(() => averageGradients([], 8), RangeError);
  assert.throws(() => averageGradients([a, [a[0]]], 8), /replicas\[1\] must hold 2 gradients/);
  assert.throws(
    () => averageGradients([a, [a[0], new Float32Array(4)]], 8),
    /replicas\[1\]\[1\] must be a Float32Array of 3 values/,
  );
});
