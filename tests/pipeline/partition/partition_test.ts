import assert from "node:assert/strict";
import {
  type CostedLayer,
  evaluatePartition,
  FixedPartition,
  LoadBalancedPartition,
  UniformPartition,
  validatePartition,
} from "../../../src/pipeline/partition/partition.ts";

/** Small deterministic generator (mulberry32) so failures reproduce. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function sumRange(c: readonly number[], a: number, b: number): number {
  let s = 0;
  for (let i = a; i < b; i++) s += c[i];
  return s;
}

/** Every way to cut n layers into k non-empty stages, as boundary lists, in lexicographic order. */
function allPartitions(n: number, k: number): number[][] {
  const out: number[][] = [];
  const cur = [0];
  const rec = (stagesLeft: number) => {
    const at = cur[cur.length - 1];
    if (stagesLeft === 1) {
      out.push([...cur, n]);
      return;
    }
    for (let b = at + 1; b <= n - stagesLeft + 1; b++) {
      cur.push(b);
      rec(stagesLeft - 1);
      cur.pop();
    }
  };
  rec(k);
  return out;
}

/**
 * The documented optimum by exhaustive search: smallest bottleneck, then the
 * smallest sum of squared stage costs, then the smallest sum of squared
 * layer counts, then the lexicographically smallest boundaries.
 */
function bruteForce(costs: readonly number[], k: number): number[] {
  let best: number[] | null = null;
  let key: [number, number, number] = [Infinity, Infinity, Infinity];
  for (const b of allPartitions(costs.length, k)) {
    const stage = b.slice(0, -1).map((s, i) => sumRange(costs, s, b[i + 1]));
    const max = Math.max(...stage);
    // Sum of squares folded from the right, as a suffix recursion would add them.
    let sq = 0;
    let ln = 0;
    for (let i = stage.length - 1; i >= 0; i--) {
      sq = stage[i] * stage[i] + sq;
      ln = (b[i + 1] - b[i]) ** 2 + ln;
    }
    const cand: [number, number, number] = [max, sq, ln];
    const better = cand[0] < key[0] ||
      (cand[0] === key[0] && (cand[1] < key[1] || (cand[1] === key[1] && cand[2] < key[2])));
    if (better) { // strict: the first (lexicographically smallest) of equals stays
      best = b;
      key = cand;
    }
  }
  return best!;
}

function counts(boundaries: readonly number[]): number[] {
  return boundaries.slice(1).map((b, i) => b - boundaries[i]);
}

Deno.test("LoadBalancedPartition equals brute force, ties included (integer costs)", () => {
  const r = rng(1);
  const lb = new LoadBalancedPartition();
  let cases = 0;
  for (let n = 1; n <= 9; n++) {
    for (let k = 1; k <= n; k++) {
      for (let rep = 0; rep < 6; rep++) {
        // Small range: many equal sums, so the tie-break rules are exercised.
        const costs = Array.from({ length: n }, () => Math.floor(r() * 4));
        const got = lb.partition(costs, k);
        const want = bruteForce(costs, k);
        assert.deepEqual(got.boundaries, want, `costs ${costs} k=${k}`);
        cases++;
      }
    }
  }
  assert.equal(cases, 45 * 6);
});

Deno.test("LoadBalancedPartition equals brute force on random real costs", () => {
  const r = rng(2);
  const lb = new LoadBalancedPartition();
  for (let t = 0; t < 150; t++) {
    const n = 1 + Math.floor(r() * 10);
    const k = 1 + Math.floor(r() * n);
    const costs = Array.from({ length: n }, () => r() * 100);
    const got = lb.partition(costs, k);
    const want = bruteForce(costs, k);
    assert.deepEqual(got.boundaries, want, `costs ${costs} k=${k}`);
    const wantMax = Math.max(...want.slice(0, -1).map((s, i) => sumRange(costs, s, want[i + 1])));
    assert.equal(got.bottleneck, wantMax);
  }
});

/** Independent oracle: smallest integer bottleneck by binary search with a greedy probe. */
function greedyBottleneck(costs: readonly number[], k: number): number {
  const fits = (limit: number) => {
    let stages = 1;
    let s = 0;
    for (const c of costs) {
      if (c > limit) return false;
      if (s + c > limit) {
        stages++;
        s = c;
      } else s += c;
    }
    // Fewer stages than k can always be split further (n >= k, stages non-empty).
    return stages <= k;
  };
  let lo = 0;
  let hi = costs.reduce((a, b) => a + b, 0);
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (fits(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

Deno.test("LoadBalancedPartition bottleneck equals the greedy binary-search oracle on larger inputs", () => {
  const r = rng(3);
  const lb = new LoadBalancedPartition();
  for (let t = 0; t < 20; t++) {
    const n = 50 + Math.floor(r() * 250);
    const k = 1 + Math.floor(r() * 32);
    const costs = Array.from({ length: n }, () => Math.floor(r() * 1000));
    const res = lb.partition(costs, k);
    assert.equal(res.bottleneck, greedyBottleneck(costs, k), `n=${n} k=${k}`);
    validatePartition(res.boundaries, n, k);
    assert.equal(res.stageCosts.reduce((a, b) => a + b, 0), costs.reduce((a, b) => a + b, 0));
  }
});

Deno.test("LoadBalancedPartition: all-zero costs give even layer counts", () => {
  const res = new LoadBalancedPartition().partition(new Array(10).fill(0), 4);
  assert.deepEqual([...counts(res.boundaries)].sort(), [2, 2, 3, 3]);
  // Lexicographically smallest among the even splits.
  assert.deepEqual(res.boundaries, [0, 2, 4, 7, 10]);
  assert.equal(res.bottleneck, 0);
  assert.equal(res.imbalance, 1);
});

Deno.test("result fields: stage costs, bottleneck and imbalance = max / mean", () => {
  const costs = [3, 1, 4, 1, 5, 9, 2, 6];
  const res = new UniformPartition().partition(costs, 4);
  assert.deepEqual(res.boundaries, [0, 2, 4, 6, 8]);
  assert.deepEqual(res.stageCosts, [4, 5, 14, 8]);
  assert.equal(res.bottleneck, 14);
  assert.equal(res.imbalance, 14 / (31 / 4));
  assert.ok(Object.isFrozen(res.boundaries));
});

Deno.test("UniformPartition: equal counts, remainder spread evenly", () => {
  const u = new UniformPartition();
  // 10 layers, 4 stages: 2 each, the 2 extra layers on stages 1 and 3.
  assert.deepEqual(u.partition(new Array(10).fill(1), 4).boundaries, [0, 2, 5, 7, 10]);
  // 7 in 3: one extra, on the middle stage.
  assert.deepEqual(u.partition(new Array(7).fill(1), 3).boundaries, [0, 2, 5, 7]);
  // Costs do not matter.
  assert.deepEqual(u.partition([100, 1, 1, 1], 2).boundaries, [0, 2, 4]);
  for (let n = 1; n <= 40; n++) {
    for (let k = 1; k <= n; k++) {
      const c = counts(u.partition(new Array(n).fill(1), k).boundaries);
      const q = Math.floor(n / k);
      const r = n % k;
      assert.equal(c.reduce((a, b) => a + b, 0), n);
      assert.ok(c.every((x) => x === q || x === q + 1), `n=${n} k=${k}: ${c}`);
      const extras = c.flatMap((x, i) => (x === q + 1 ? [i] : []));
      assert.equal(extras.length, r);
      // Evenly spread: consecutive extra stages are at least ⌊k/r⌋ apart.
      for (let j = 1; j < extras.length; j++) {
        assert.ok(extras[j] - extras[j - 1] >= Math.floor(k / r), `n=${n} k=${k}: ${c}`);
      }
      // ... and any window of w stages holds about w·r/k of them.
      for (let w = 1; w <= k; w++) {
        for (let s = 0; s + w <= k; s++) {
          const inWin = extras.filter((e) => e >= s && e < s + w).length;
          assert.ok(Math.abs(inWin - (w * r) / k) <= 1, `n=${n} k=${k} window ${s}+${w}: ${c}`);
        }
      }
    }
  }
});

Deno.test("UniformPartition: offsets make the ends lighter", () => {
  const ones = (n: number) => new Array(n).fill(1);
  const ends = new UniformPartition({ firstStageOffset: 1, lastStageOffset: 1 });
  // 16 + 2 counted layers in 4 stages: loads 4,5,5,4 → counts 3,5,5,3.
  assert.deepEqual(ends.partition(ones(16), 4).boundaries, [0, 3, 8, 13, 16]);
  // 10 + 2 = 12 counted: loads 3 each → 2,3,3,2.
  assert.deepEqual(ends.partition(ones(10), 4).boundaries, [0, 2, 5, 8, 10]);
  // Only the first is offset by 2: 9 + 2 in 3 → counts 1,4,4.
  const first2 = new UniformPartition({ firstStageOffset: 2 });
  assert.deepEqual(first2.partition(ones(9), 3).boundaries, [0, 1, 5, 9]);
  // A huge offset still leaves the stage one layer.
  const huge = new UniformPartition({ firstStageOffset: 100 });
  assert.deepEqual(huge.partition(ones(5), 3).boundaries, [0, 1, 3, 5]);
  // No interior stage: the left-over layer goes to the smaller offset.
  const two = new UniformPartition({ firstStageOffset: 1, lastStageOffset: 2 });
  assert.deepEqual(two.partition(ones(6), 2).boundaries, [0, 4, 6]);
  // Property: the ends never hold more layers than any interior stage.
  for (let n = 3; n <= 30; n++) {
    for (let k = 3; k <= n; k++) {
      const c = counts(ends.partition(ones(n), k).boundaries);
      const minInterior = Math.min(...c.slice(1, -1));
      assert.ok(c[0] <= minInterior && c[k - 1] <= minInterior, `n=${n} k=${k}: ${c}`);
      assert.equal(c.reduce((a, b) => a + b, 0), n);
      assert.ok(c.every((x) => x >= 1));
    }
  }
});

const MODEL: CostedLayer[] = [
  { kind: "Embedding", cost: 100 },
  { kind: "TransformerBlock", cost: 10 },
  { kind: "ReLU", cost: 1 },
  { kind: "TransformerBlock", cost: 10 },
  { kind: "ReLU", cost: 1 },
  { kind: "TransformerBlock", cost: 10 },
  { kind: "ReLU", cost: 1 },
  { kind: "TransformerBlock", cost: 10 },
  { kind: "Linear", cost: 300 },
];

Deno.test("type regex: only matching layers count, the others are still placed", () => {
  const lb = new LoadBalancedPartition({ typeRegex: "transformerblock" }); // case-insensitive
  const res = lb.partition(MODEL, 2);
  assert.deepEqual(res.stageCosts, [20, 20]);
  assert.equal(res.boundaries[0], 0);
  assert.equal(res.boundaries[2], MODEL.length);
  // Two blocks per stage, as DeepSpeed's type:REGEX balances them.
  const blocksIn = (a: number, b: number) =>
    MODEL.slice(a, b).filter((l) => l.kind === "TransformerBlock").length;
  assert.equal(blocksIn(0, res.boundaries[1]), 2);
  assert.equal(blocksIn(res.boundaries[1], MODEL.length), 2);
  // With unit costs the selection balances counts of matching layers.
  const unit = MODEL.map((l) => ({ kind: l.kind, cost: 1 }));
  const byCount = new LoadBalancedPartition({ typeRegex: /^(TransformerBlock|Linear)$/ })
    .partition(unit, 5);
  assert.deepEqual(byCount.stageCosts, [1, 1, 1, 1, 1]);
  // A global RegExp gives the same answer on every call (no lastIndex state).
  const g = new LoadBalancedPartition({ typeRegex: /Block/g });
  assert.deepEqual(g.partition(MODEL, 2).boundaries, g.partition(MODEL, 2).boundaries);
  assert.deepEqual(g.partition(MODEL, 2).stageCosts, [20, 20]);
  // The uniform strategy reports selected costs too.
  const u = new UniformPartition({ typeRegex: "Linear" }).partition(MODEL, 3);
  assert.deepEqual(u.stageCosts, [0, 0, 300]);
  // evaluatePartition applies the same selection.
  assert.deepEqual(evaluatePartition(MODEL, [0, 1, 9], { typeRegex: "^relu$" }).stageCosts, [0, 3]);
});

Deno.test("type regex errors: no match, plain numbers, invalid pattern", () => {
  assert.throws(
    () => new LoadBalancedPartition({ typeRegex: "Conv" }).partition(MODEL, 2),
    (e: Error) =>
      e instanceof RangeError && /\/Conv\/i matches none/.test(e.message) &&
      /Embedding, TransformerBlock, ReLU, Linear/.test(e.message),
  );
  assert.throws(
    () => new LoadBalancedPartition({ typeRegex: "Block" }).partition([1, 2, 3], 2),
    (e: Error) => e instanceof TypeError && /needs layer kinds, got plain numbers/.test(e.message),
  );
  assert.throws(
    () => new LoadBalancedPartition({ typeRegex: "(" }),
    (e: Error) => e instanceof TypeError && /valid regular expression, got "\("/.test(e.message),
  );
});

Deno.test("LoadBalanced bottleneck ≤ Uniform on uneven layers, and strictly lower on the model", () => {
  const lb = new LoadBalancedPartition();
  const u = new UniformPartition();
  const model = [
    { kind: "Embedding", cost: 400 },
    ...Array.from({ length: 12 }, () => ({ kind: "TransformerBlock", cost: 100 })),
    { kind: "Linear", cost: 800 },
  ];
  for (const k of [2, 3, 4, 7]) {
    const a = lb.partition(model, k).bottleneck;
    const b = u.partition(model, k).bottleneck;
    assert.ok(a < b, `k=${k}: balanced ${a} vs uniform ${b}`);
  }
  const r = rng(4);
  for (let t = 0; t < 100; t++) {
    const n = 2 + Math.floor(r() * 40);
    const k = 1 + Math.floor(r() * n);
    const costs = Array.from({ length: n }, () => r() ** 3 * 1000);
    assert.ok(lb.partition(costs, k).bottleneck <= u.partition(costs, k).bottleneck);
  }
});

Deno.test("FixedPartition reports the given cut and checks it", () => {
  const f = new FixedPartition([0, 1, 3]);
  assert.deepEqual(f.partition([5, 2, 2], 2).stageCosts, [5, 4]);
  assert.throws(
    () => f.partition([5, 2, 2], 3),
    (e: Error) => e instanceof RangeError && /numStages \+ 1 = 4 entries, got 3/.test(e.message),
  );
  assert.throws(
    () => f.partition([5, 2, 2, 1], 2),
    (e: Error) => e instanceof RangeError && /end at numLayers = 4, got 3/.test(e.message),
  );
});

Deno.test("bad numStages is a RangeError naming the value", () => {
  for (const s of [new UniformPartition(), new LoadBalancedPartition()]) {
    for (const bad of [0, -1, 2.5, NaN, Infinity, "2" as unknown as number]) {
      assert.throws(
        () => s.partition([1, 2, 3], bad),
        (e: Error) =>
          e instanceof RangeError &&
          e.message ===
            `numStages must be a positive integer, got ${
              typeof bad === "string" ? JSON.stringify(bad) : String(bad)
            }`,
        `${s.name} ${String(bad)}`,
      );
    }
  }
});

Deno.test("fewer layers than stages is a RangeError naming both numbers", () => {
  for (const s of [new UniformPartition(), new LoadBalancedPartition()]) {
    assert.throws(
      () => s.partition([1, 2, 3], 4),
      (e: Error) =>
        e instanceof RangeError &&
        e.message ===
          "cannot cut 3 layers into 4 stages: every stage needs at least one layer",
    );
    assert.throws(
      () => s.partition([], 1),
      (e: Error) => e instanceof RangeError && /cannot cut 0 layers into 1 stages/.test(e.message),
    );
  }
});

Deno.test("bad costs are a RangeError naming the index and the value", () => {
  const cases: [unknown[], string][] = [
    [[1, NaN, 2], "got NaN at index 1"],
    [[1, 2, -0.5], "got -0.5 at index 2"],
    [[Infinity, 1], "got Infinity at index 0"],
    [[{ kind: "Linear", cost: 1 }, { kind: "ReLU", cost: -3 }], "got -3 at index 1"],
    [[{ kind: "Linear", cost: "7" }], 'got "7" at index 0'],
  ];
  for (const s of [new UniformPartition(), new LoadBalancedPartition()]) {
    for (const [layers, msg] of cases) {
      assert.throws(
        () => s.partition(layers as number[], 1),
        (e: Error) =>
          e instanceof RangeError &&
          e.message === `layer costs must be finite and non-negative, ${msg}`,
      );
    }
  }
});

Deno.test("malformed layer records are a TypeError naming the index", () => {
  const lb = new LoadBalancedPartition();
  assert.throws(
    () => lb.partition([{ kind: "Linear", cost: 1 }, { kind: 5, cost: 1 }] as never, 1),
    (e: Error) =>
      e instanceof TypeError && e.message === "layer kind must be a string, got 5 at index 1",
  );
  assert.throws(
    () => lb.partition([1, { kind: "Linear", cost: 1 }] as never, 1),
    (e: Error) => e instanceof TypeError && /all numbers or all \{ kind, cost \}/.test(e.message),
  );
  assert.throws(
    () => lb.partition([1, null] as never, 1),
    (e: Error) => e instanceof TypeError && /got null at index 1/.test(e.message),
  );
  assert.throws(
    () => lb.partition("abc" as never, 1),
    (e: Error) => e instanceof TypeError && /layers must be an array/.test(e.message),
  );
});

Deno.test("bad offsets are a RangeError naming the value", () => {
  for (const [opt, bad] of [["firstStageOffset", -1], ["lastStageOffset", 0.5]] as const) {
    assert.throws(
      () => new UniformPartition({ [opt]: bad }),
      (e: Error) =>
        e instanceof RangeError && e.message === `${opt} must be an integer >= 0, got ${bad}`,
    );
  }
});

Deno.test("validatePartition: each rule names the offending value", () => {
  const bad: [readonly number[], number, number | undefined, RegExp][] = [
    [
      [0, 2, 2, 5],
      5,
      undefined,
      /strictly increasing, got 2 then 2 at index 2 \(stage 1 would be empty\)/,
    ],
    [[0, 3, 2, 5], 5, undefined, /strictly increasing, got 3 then 2 at index 2/],
    [[1, 3, 5], 5, undefined, /must start at 0, got 1/],
    [[0, 3, 6], 5, undefined, /must end at numLayers = 5, got 6/],
    [[0, 7, 5], 5, undefined, /within 0…5, got 7 at index 1/],
    [[0, 2.5, 5], 5, undefined, /must be integers, got 2.5 at index 1/],
    [[0, 5], 5, 2, /numStages \+ 1 = 3 entries, got 2/],
    [[0], 0, undefined, /at least 2 entries \(one stage\), got \[0\]/],
    [[0, 5], -1, undefined, /numLayers must be an integer >= 0, got -1/],
    [[0, 5], 5, 0, /numStages must be a positive integer, got 0/],
  ];
  for (const [b, n, k, re] of bad) {
    assert.throws(
      () => validatePartition(b, n, k),
      (e: Error) => e instanceof RangeError && re.test(e.message),
      `${b} ${n} ${k}`,
    );
  }
  assert.throws(
    () => validatePartition("0,5" as never, 5),
    (e: Error) => e instanceof TypeError && /must be an array/.test(e.message),
  );
  // Valid ones pass silently.
  validatePartition([0, 5], 5);
  validatePartition([0, 1, 2, 3], 3, 3);
});
