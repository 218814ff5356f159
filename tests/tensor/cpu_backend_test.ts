/**
 * Numerics of every kernel against naive formulas written here (in f64),
 * every *Backward kernel against central finite differences of its forward,
 * and memory accounting. Runs over every backend from `testBackends()`, so
 * the CPU reference and WebGPU are held to the same formulas.
 */

import assert from "node:assert/strict";
import type { AdamWParams, Backend, Shape } from "../../src/tensor/backend.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { MemoryTracker } from "../../src/tensor/_memory.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { assertClose, lcgData } from "./_helpers.ts";
import { testBackends } from "./_backends.ts";

const backends = await testBackends();

/**
 * Stated tolerance, relative to 1 + |expected|: the CPU reference accumulates
 * in f64 and rounds once; other backends accumulate in f32 and use the GPU's
 * transcendental functions.
 */
function tol(be: Backend): number {
  return be.name === "cpu" ? 2e-6 : 1e-4;
}

/** Tolerance for finite-difference gradients (f32 forward outputs, step 1e-2). */
const FD_TOL = 2e-3;

function size(shape: Shape): number {
  return shape.reduce((a, b) => a * b, 1);
}

function up(be: Backend, data: ArrayLike<number>, shape: Shape): Tensor {
  return be.fromData(Float32Array.from(data), shape);
}

function rand(be: Backend, shape: Shape, seed: number, lo = -1, hi = 1): [Tensor, Float32Array] {
  const d = lcgData(size(shape), seed, lo, hi);
  return [be.fromData(d, shape), d];
}

async function read(t: Tensor): Promise<Float32Array> {
  const d = await t.toArray();
  t.dispose();
  return d;
}

/**
 * Central finite differences of `L(x) = Σ dy · f(x)` at `x0`, one coordinate
 * at a time. The step actually taken is measured after rounding to f32.
 * All forwards are queued before any read-back so GPU reads overlap.
 */
async function fdGrad(
  be: Backend,
  f: (x: Tensor) => Tensor,
  x0: Float32Array,
  shape: Shape,
  dy: ArrayLike<number>,
  h = 1e-2,
): Promise<Float64Array> {
  const outs: Tensor[] = [];
  const steps: number[] = [];
  for (let i = 0; i < x0.length; i++) {
    const xp = Float32Array.from(x0), xm = Float32Array.from(x0);
    xp[i] += h;
    xm[i] -= h;
    steps.push(xp[i] - xm[i]);
    for (const x of [xp, xm]) {
      const xt = be.fromData(x, shape);
      outs.push(f(xt));
      xt.dispose();
    }
  }
  const ys = await Promise.all(outs.map(read));
  const g = new Float64Array(x0.length);
  for (let i = 0; i < x0.length; i++) {
    let lp = 0, lm = 0;
    const yp = ys[2 * i], ym = ys[2 * i + 1];
    for (let j = 0; j < yp.length; j++) {
      lp += dy[j] * yp[j];
      lm += dy[j] * ym[j];
    }
    g[i] = (lp - lm) / steps[i];
  }
  return g;
}

// ---- naive references ---------------------------------------------------------------

function naiveMatmul(
  A: Float32Array,
  B: Float32Array,
  batch: number,
  M: number,
  K: number,
  N: number,
  transA: boolean,
  transB: boolean,
  bShared: boolean,
): Float64Array {
  const C = new Float64Array(batch * M * N);
  for (let b = 0; b < batch; b++) {
    const ao = b * M * K, bo = bShared ? 0 : b * K * N;
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) {
          const a = transA ? A[ao + k * M + i] : A[ao + i * K + k];
          const v = transB ? B[bo + j * K + k] : B[bo + k * N + j];
          s += a * v;
        }
        C[b * M * N + i * N + j] = s;
      }
    }
  }
  return C;
}

const geluRef = (x: number): number =>
  0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));

function softmaxRows(x: ArrayLike<number>, rows: number, n: number, causal: boolean): Float64Array {
  const y = new Float64Array(rows * n);
  for (let r = 0; r < rows; r++) {
    const lim = causal ? (r % n) + 1 : n;
    let mx = -Infinity;
    for (let j = 0; j < lim; j++) mx = Math.max(mx, x[r * n + j]);
    let s = 0;
    for (let j = 0; j < lim; j++) s += Math.exp(x[r * n + j] - mx);
    for (let j = 0; j < lim; j++) y[r * n + j] = Math.exp(x[r * n + j] - mx) / s;
  }
  return y;
}

// ---- linear algebra ------------------------------------------------------------------

Deno.test("matmul: every transpose combination on awkward shapes equals the naive triple loop", async () => {
  const shapes: [number, number, number][] = [
    [1, 1, 1],
    [1, 7, 5],
    [7, 1, 5],
    [5, 7, 1],
    [1, 33, 1],
    [17, 33, 9],
    [65, 31, 70],
  ];
  for (const be of backends) {
    let seed = 1;
    for (const [M, K, N] of shapes) {
      for (const transA of [false, true]) {
        for (const transB of [false, true]) {
          const [a, A] = rand(be, transA ? [K, M] : [M, K], seed++);
          const [b, B] = rand(be, transB ? [N, K] : [K, N], seed++);
          const c = ops.matmul(a, b, { transA, transB });
          assert.deepEqual(c.shape, [M, N]);
          const want = naiveMatmul(A, B, 1, M, K, N, transA, transB, true);
          assertClose(
            await read(c),
            want,
            tol(be),
            `${be.name} ${M}x${K}x${N} tA=${transA} tB=${transB}`,
          );
          a.dispose();
          b.dispose();
        }
      }
    }
  }
});

Deno.test("matmul: batched operands, and a 2-D b shared by every batch entry", async () => {
  for (const be of backends) {
    let seed = 100;
    const batchDims = [2, 3], batch = 6, M = 5, K = 9, N = 4;
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        for (const bShared of [false, true]) {
          const [a, A] = rand(be, [...batchDims, ...(transA ? [K, M] : [M, K])], seed++);
          const bShape = transB ? [N, K] : [K, N];
          const [b, B] = rand(be, bShared ? bShape : [...batchDims, ...bShape], seed++);
          const c = ops.matmul(a, b, { transA, transB });
          assert.deepEqual(c.shape, [2, 3, M, N]);
          const want = naiveMatmul(A, B, batch, M, K, N, transA, transB, bShared);
          assertClose(
            await read(c),
            want,
            tol(be),
            `${be.name} tA=${transA} tB=${transB} shared=${bShared}`,
          );
          a.dispose();
          b.dispose();
        }
      }
    }
  }
});

Deno.test("matmul (CPU, exact): each output is its products summed in order in f64, rounded once to f32", async () => {
  // The CPU matmul works in 4×4 tiles of C plus the edges past the last full
  // tile; every output must still be exactly the ordered f64 sum, rounded.
  const be = new CpuBackend({ exact: true });
  const shapes: [number, number, number, number][] = [
    [1, 4, 3, 4],
    [1, 8, 12, 8],
    [1, 9, 5, 11],
    [3, 6, 7, 5],
    [2, 65, 31, 70],
  ];
  let seed = 500;
  for (const [batch, M, K, N] of shapes) {
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        for (const bShared of [false, true]) {
          const [a, A] = rand(be, [batch, ...(transA ? [K, M] : [M, K])], seed++);
          const bShape = transB ? [N, K] : [K, N];
          const [b, B] = rand(be, bShared ? bShape : [batch, ...bShape], seed++);
          const c = ops.matmul(a, b, { transA, transB });
          const want = Float32Array.from(
            naiveMatmul(A, B, batch, M, K, N, transA, transB, bShared),
          );
          assert.deepEqual(
            await read(c),
            want,
            `${batch}x${M}x${K}x${N} tA=${transA} tB=${transB} shared=${bShared}`,
          );
          for (const t of [a, b, c]) t.dispose();
        }
      }
    }
  }
});

Deno.test("elementwise: add, sub, mul, scale, axpy, fill and copy", async () => {
  for (const be of backends) {
    for (const shape of [[1], [1, 37], [37, 1], [3, 5, 7]]) {
      const [a, A] = rand(be, shape, 1);
      const [b, B] = rand(be, shape, 2);
      const n = A.length;
      const map = (f: (i: number) => number) => Float64Array.from({ length: n }, (_, i) => f(i));
      const t = tol(be), w = `${be.name} [${shape}]`;
      assertClose(await read(ops.add(a, b)), map((i) => A[i] + B[i]), t, `add ${w}`);
      assertClose(await read(ops.sub(a, b)), map((i) => A[i] - B[i]), t, `sub ${w}`);
      assertClose(await read(ops.mul(a, b)), map((i) => A[i] * B[i]), t, `mul ${w}`);
      assertClose(await read(ops.scale(a, -2.5)), map((i) => -2.5 * A[i]), t, `scale ${w}`);
      const y = ops.copy(a);
      ops.axpyInPlace(y, 0.75, b);
      assertClose(await y.toArray(), map((i) => A[i] + 0.75 * B[i]), t, `axpy ${w}`);
      ops.fillInPlace(y, 3.5);
      assertClose(await read(y), map(() => 3.5), 0, `fill ${w}`);
      assertClose(await a.toArray(), A, 0, `copy left the source unchanged ${w}`);
      const z = ops.copy(a), live = be.memory.liveBytes;
      ops.copyInPlace(z, b);
      assertClose(await z.toArray(), B, 0, `copyInPlace ${w}`);
      ops.scaleInPlace(z, -2.5);
      assertClose(await z.toArray(), map((i) => -2.5 * B[i]), t, `scaleInPlace ${w}`);
      const view = z.reshape(z.shape);
      ops.copyInPlace(z, view); // a view of itself: unchanged
      view.dispose();
      assertClose(await z.toArray(), map((i) => -2.5 * B[i]), t, `copyInPlace onto itself ${w}`);
      assert.equal(be.memory.liveBytes, live, `in-place ops allocate nothing ${w}`);
      assertClose(await b.toArray(), B, 0, `copyInPlace left the source unchanged ${w}`);
      z.dispose();
      a.dispose();
      b.dispose();
    }
  }
});

Deno.test("addBias: the bias row is added to every row", async () => {
  for (const be of backends) {
    for (const shape of [[1, 9], [9, 1], [2, 3, 13]]) {
      const cols = shape[shape.length - 1];
      const [x, X] = rand(be, shape, 3);
      const [bias, Bv] = rand(be, [cols], 4);
      const want = Float64Array.from(X, (v, i) => v + Bv[i % cols]);
      assertClose(await read(ops.addBias(x, bias)), want, tol(be), `${be.name} [${shape}]`);
      x.dispose();
      bias.dispose();
    }
  }
});

// ---- activations ------------------------------------------------------------------------

Deno.test("relu, gelu, tanh forward, including large magnitudes", async () => {
  const xs = [-30, -20, -5, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 3, 5, 20, 30];
  for (const be of backends) {
    const x = up(be, xs, [xs.length]);
    const t = tol(be);
    assertClose(await read(ops.relu(x)), xs.map((v) => Math.max(v, 0)), t, `relu ${be.name}`);
    assertClose(await read(ops.gelu(x)), xs.map(geluRef), t, `gelu ${be.name}`);
    assertClose(await read(ops.tanh(x)), xs.map(Math.tanh), t, `tanh ${be.name}`);
    x.dispose();
  }
});

Deno.test("reluBackward, geluBackward, tanhBackward equal finite differences of the forward", async () => {
  for (const be of backends) {
    const shape = [3, 7];
    // Keep relu inputs away from the kink at 0.
    const X = lcgData(21, 5, -3, 3).map((v) => (Math.abs(v) < 0.1 ? v + 0.3 : v));
    const DY = lcgData(21, 6);
    const x = up(be, X, shape), dy = up(be, DY, shape);
    const cases: [string, (x: Tensor) => Tensor, () => Tensor][] = [
      ["relu", (t) => ops.relu(t), () => ops.reluBackward(x, dy)],
      ["gelu", (t) => ops.gelu(t), () => ops.geluBackward(x, dy)],
      ["tanh", (t) => ops.tanh(t), () => {
        const y = ops.tanh(x);
        const g = ops.tanhBackward(y, dy);
        y.dispose();
        return g;
      }],
    ];
    for (const [name, f, back] of cases) {
      const want = await fdGrad(be, f, X, shape, DY);
      assertClose(await read(back()), want, FD_TOL, `${name}Backward ${be.name}`);
    }
    x.dispose();
    dy.dispose();
  }
});

// ---- softmax -------------------------------------------------------------------------------

Deno.test("softmax: naive formula, rows sum to 1, stable for large logits", async () => {
  for (const be of backends) {
    for (const shape of [[1, 1], [1, 50], [7, 1], [4, 33]]) {
      const [x, X] = rand(be, shape, 7, -4, 4);
      const rows = size(shape.slice(0, -1)), n = shape[shape.length - 1];
      assertClose(
        await read(ops.softmax(x)),
        softmaxRows(X, rows, n, false),
        tol(be),
        `${be.name} [${shape}]`,
      );
      x.dispose();
    }
    const big = up(be, [1000, 999, 998, -1000, 0, 80, 90, 100], [2, 4]);
    const y = await read(ops.softmax(big));
    assert.ok(y.every(Number.isFinite), `${be.name}: finite for large logits ${y}`);
    assertClose(
      y,
      softmaxRows([1000, 999, 998, -1000, 0, 80, 90, 100], 2, 4, false),
      tol(be),
      "large",
    );
    big.dispose();
  }
});

Deno.test("softmax causal: entries j > (row mod T) are exactly 0, the rest a softmax over j <= i", async () => {
  for (const be of backends) {
    for (const shape of [[1, 1, 1], [2, 3, 3], [1, 2, 9, 9]]) {
      const T = shape[shape.length - 1], rows = size(shape) / T;
      const [x, X] = rand(be, shape, 8, -3, 3);
      const y = await read(ops.softmax(x, { causal: true }));
      for (let r = 0; r < rows; r++) {
        for (let j = (r % T) + 1; j < T; j++) {
          assert.equal(y[r * T + j], 0, `${be.name} row ${r} col ${j}`);
        }
      }
      assertClose(y, softmaxRows(X, rows, T, true), tol(be), `${be.name} causal [${shape}]`);
      x.dispose();
    }
  }
});

Deno.test("softmaxBackward equals finite differences of softmax (plain and causal)", async () => {
  for (const be of backends) {
    for (const causal of [false, true]) {
      const shape = causal ? [2, 4, 4] : [3, 6];
      const X = lcgData(size(shape), 9, -2, 2), DY = lcgData(size(shape), 10);
      const x = up(be, X, shape), dy = up(be, DY, shape);
      const y = ops.softmax(x, { causal });
      const got = await read(ops.softmaxBackward(y, dy));
      const want = await fdGrad(be, (t) => ops.softmax(t, { causal }), X, shape, DY);
      assertClose(got, want, FD_TOL, `${be.name} causal=${causal}`);
      for (const t of [x, dy, y]) t.dispose();
    }
  }
});

// ---- layer norm -------------------------------------------------------------------------------

Deno.test("layerNorm forward: naive mean, population variance, rstd and affine output", async () => {
  for (const be of backends) {
    for (const shape of [[1, 1], [1, 40], [5, 1], [2, 3, 17]]) {
      const n = shape[shape.length - 1], rows = size(shape) / n;
      const [x, X] = rand(be, shape, 11, -3, 5);
      const [g, G] = rand(be, [n], 12);
      const [b, B] = rand(be, [n], 13);
      const eps = 1e-5;
      const { y, mean, rstd } = ops.layerNorm(x, g, b, eps);
      assert.deepEqual(mean.shape, [rows]);
      assert.deepEqual(rstd.shape, [rows]);
      const wantY = new Float64Array(X.length), wantM = new Float64Array(rows);
      const wantR = new Float64Array(rows);
      for (let r = 0; r < rows; r++) {
        const row = Array.from(X.subarray(r * n, r * n + n));
        const mu = row.reduce((s, v) => s + v, 0) / n;
        const v = row.reduce((s, v) => s + (v - mu) ** 2, 0) / n;
        wantM[r] = mu;
        wantR[r] = 1 / Math.sqrt(v + eps);
        for (let j = 0; j < n; j++) wantY[r * n + j] = (row[j] - mu) * wantR[r] * G[j] + B[j];
      }
      const w = `${be.name} [${shape}]`;
      // rstd reaches 1/sqrt(eps) ~ 316 for constant rows, so compare it relatively.
      assertClose(await read(mean), wantM, tol(be), `mean ${w}`);
      assertClose(await read(rstd), wantR, tol(be) * 10, `rstd ${w}`);
      assertClose(await read(y), wantY, tol(be) * 10, `y ${w}`);
      for (const t of [x, g, b]) t.dispose();
    }
  }
});

Deno.test("layerNormBackwardInput and layerNormBackwardWeight equal finite differences", async () => {
  for (const be of backends) {
    const shape = [3, 6], n = 6;
    const X = lcgData(18, 14, -2, 2), G = lcgData(n, 15, 0.5, 1.5), Bv = lcgData(n, 16);
    const DY = lcgData(18, 17);
    const x = up(be, X, shape), g = up(be, G, [n]), b = up(be, Bv, [n]), dy = up(be, DY, shape);
    const { y, mean, rstd } = ops.layerNorm(x, g, b);
    y.dispose();
    const dx = await read(ops.layerNormBackwardInput(dy, x, { mean, rstd }, g));
    const { dgamma, dbeta } = ops.layerNormBackwardWeight(dy, x, { mean, rstd });
    const yOf = (r: { y: Tensor; mean: Tensor; rstd: Tensor }): Tensor => {
      r.mean.dispose();
      r.rstd.dispose();
      return r.y;
    };
    const wantDx = await fdGrad(be, (t) => yOf(ops.layerNorm(t, g, b)), X, shape, DY);
    const wantDg = await fdGrad(be, (t) => yOf(ops.layerNorm(x, t, b)), G, [n], DY);
    const wantDb = await fdGrad(be, (t) => yOf(ops.layerNorm(x, g, t)), Bv, [n], DY);
    assertClose(dx, wantDx, FD_TOL, `dx ${be.name}`);
    assertClose(await read(dgamma), wantDg, FD_TOL, `dgamma ${be.name}`);
    assertClose(await read(dbeta), wantDb, FD_TOL, `dbeta ${be.name}`);
    for (const t of [x, g, b, dy, mean, rstd]) t.dispose();
  }
});

// ---- reductions ------------------------------------------------------------------------------

Deno.test("sumRows, sum and sumSquares equal naive sums", async () => {
  for (const be of backends) {
    for (const shape of [[1], [1, 1], [1, 29], [29, 1], [2, 7, 5], [300, 3]]) {
      const n = shape[shape.length - 1];
      const [x, X] = rand(be, shape, 18);
      const cols = new Float64Array(n);
      X.forEach((v, i) => (cols[i % n] += v));
      const w = `${be.name} [${shape}]`;
      const rs = ops.sumRows(x);
      assert.deepEqual(rs.shape, [n]);
      assertClose(await read(rs), cols, tol(be) * 10, `sumRows ${w}`);
      const s = ops.sum(x), s2 = ops.sumSquares(x);
      assert.deepEqual(s.shape, [1]);
      assert.deepEqual(s2.shape, [1]);
      assertClose(await read(s), [X.reduce((a, v) => a + v, 0)], tol(be) * 10, `sum ${w}`);
      assertClose(
        await read(s2),
        [X.reduce((a, v) => a + v * v, 0)],
        tol(be) * 10,
        `sumSquares ${w}`,
      );
      x.dispose();
    }
  }
});

// ---- cross-entropy and embeddings ---------------------------------------------------------------

Deno.test("crossEntropy: naive log-sum-exp loss and probabilities, stable for large logits", async () => {
  for (const be of backends) {
    for (const [R, V] of [[1, 1], [1, 13], [6, 1], [5, 11]]) {
      const [lg, L] = rand(be, [R, V], 19, -5, 5);
      const T = Array.from({ length: R }, (_, r) => (r * 7 + 3) % V);
      const tg = up(be, T, [R]);
      const { loss, probs } = ops.crossEntropy(lg, tg);
      assert.deepEqual(loss.shape, [R]);
      assert.deepEqual(probs.shape, [R, V]);
      const want = new Float64Array(R);
      for (let r = 0; r < R; r++) {
        const row = Array.from(L.subarray(r * V, r * V + V));
        const lse = Math.log(row.reduce((s, v) => s + Math.exp(v), 0));
        want[r] = lse - row[T[r]];
      }
      const w = `${be.name} [${R}, ${V}]`;
      assertClose(await read(loss), want, tol(be) * 10, `loss ${w}`);
      assertClose(await read(probs), softmaxRows(L, R, V, false), tol(be), `probs ${w}`);
      lg.dispose();
      tg.dispose();
    }
    const big = up(be, [1000, -1000, 0, 500], [1, 4]);
    const tg = up(be, [1], [1]);
    const { loss, probs } = ops.crossEntropy(big, tg);
    assertClose(await read(loss), [2000], tol(be), `${be.name}: large logits`);
    probs.dispose();
    big.dispose();
    tg.dispose();
  }
});

Deno.test("crossEntropyBackward equals finite differences of scale * sum(loss)", async () => {
  for (const be of backends) {
    const R = 4, V = 5, scale = 1 / R;
    const L = lcgData(R * V, 20, -2, 2);
    const T = [0, 4, 2, 2];
    const lg = up(be, L, [R, V]), tg = up(be, T, [R]);
    const { loss, probs } = ops.crossEntropy(lg, tg);
    loss.dispose();
    const got = await read(ops.crossEntropyBackward(probs, tg, scale));
    const lossOf = (t: Tensor): Tensor => {
      const r = ops.crossEntropy(t, tg);
      r.probs.dispose();
      return r.loss;
    };
    const want = await fdGrad(be, lossOf, L, [R, V], new Float64Array(R).fill(scale));
    assertClose(got, want, FD_TOL, be.name);
    for (const t of [lg, tg, probs]) t.dispose();
  }
});

Deno.test("embedding gathers rows; embeddingBackwardInPlace scatter-adds, repeated ids accumulate", async () => {
  for (const be of backends) {
    const V = 6, C = 5;
    const [table, Tb] = rand(be, [V, C], 21);
    const I = [5, 0, 3, 3, 5, 5, 1, 0];
    const ids = up(be, I, [2, 4]);
    const e = ops.embedding(table, ids);
    assert.deepEqual(e.shape, [2, 4, C]);
    const want = new Float64Array(I.length * C);
    I.forEach((id, i) => {
      for (let j = 0; j < C; j++) want[i * C + j] = Tb[id * C + j];
    });
    assertClose(await read(e), want, 0, `embedding ${be.name}`);

    const [dTable, D0] = rand(be, [V, C], 22);
    const [dy, G] = rand(be, [2, 4, C], 23);
    ops.embeddingBackwardInPlace(dTable, ids, dy);
    const wantD = Float64Array.from(D0);
    I.forEach((id, i) => {
      for (let j = 0; j < C; j++) wantD[id * C + j] += G[i * C + j];
    });
    assertClose(await dTable.toArray(), wantD, tol(be), `scatter-add ${be.name}`);

    // And it is the gradient of Σ dy · embedding(table, ids) with respect to table.
    const zero = be.zeros([V, C]);
    ops.embeddingBackwardInPlace(zero, ids, dy);
    const fd = await fdGrad(be, (t) => ops.embedding(t, ids), Tb, [V, C], G);
    assertClose(await read(zero), fd, FD_TOL, `finite differences ${be.name}`);
    for (const t of [table, ids, dTable, dy]) t.dispose();
  }
});

// ---- optimizer ------------------------------------------------------------------------------------

Deno.test("adamwInPlace: three steps equal the bias-corrected, decoupled-decay formula", async () => {
  for (const be of backends) {
    const n = 37;
    const P0 = lcgData(n, 24), grads = [25, 26, 27].map((s) => lcgData(n, s, -2, 2));
    grads[1][3] = 0; // a zero gradient entry still decays
    const p = up(be, P0, [n]), m = be.zeros([n]), v = be.zeros([n]);
    const base = { lr: 0.05, beta1: 0.9, beta2: 0.99, eps: 1e-6, weightDecay: 0.1 };
    const P = Float64Array.from(P0), Mm = new Float64Array(n), Vv = new Float64Array(n);
    for (let s = 1; s <= 3; s++) {
      const hp: AdamWParams = { ...base, step: s };
      const g = up(be, grads[s - 1], [n]);
      ops.adamwInPlace(p, g, m, v, hp);
      g.dispose();
      for (let i = 0; i < n; i++) {
        const gi = grads[s - 1][i];
        Mm[i] = hp.beta1 * Mm[i] + (1 - hp.beta1) * gi;
        Vv[i] = hp.beta2 * Vv[i] + (1 - hp.beta2) * gi * gi;
        const mhat = Mm[i] / (1 - hp.beta1 ** s), vhat = Vv[i] / (1 - hp.beta2 ** s);
        P[i] -= hp.lr * (mhat / (Math.sqrt(vhat) + hp.eps) + hp.weightDecay * P[i]);
      }
    }
    const t = tol(be) * 10;
    assertClose(await read(m), Mm, t, `m ${be.name}`);
    assertClose(await read(v), Vv, t, `v ${be.name}`);
    assertClose(await read(p), P, t, `param ${be.name}`);
  }
});

Deno.test("sgdInPlace: three steps equal PyTorch's SGD (momentum, weight decay, and plain)", async () => {
  for (const be of backends) {
    const n = 37;
    const P0 = lcgData(n, 31), grads = [32, 33, 34].map((s) => lcgData(n, s, -2, 2));
    for (const [lr, mu, wd] of [[0.05, 0.9, 0.1], [0.05, 0, 0.1], [0.2, 0.5, 0], [0.3, 0, 0]]) {
      const p = up(be, P0, [n]), buf = mu === 0 ? null : be.zeros([n]);
      const P = Float64Array.from(P0), Bf = new Float64Array(n);
      for (let s = 0; s < 3; s++) {
        const g = up(be, grads[s], [n]);
        ops.sgdInPlace(p, g, buf, { lr, momentum: mu, weightDecay: wd });
        g.dispose();
        for (let i = 0; i < n; i++) {
          const d = grads[s][i] + wd * P[i];
          Bf[i] = s === 0 ? d : mu * Bf[i] + d; // PyTorch: buf = d at the first step
          P[i] -= lr * (mu === 0 ? d : Bf[i]);
        }
      }
      const t = tol(be) * 10, w = `${be.name} lr ${lr} momentum ${mu} weightDecay ${wd}`;
      assertClose(await read(p), P, t, `param ${w}`);
      if (buf !== null) assertClose(await read(buf), Bf, t, `buf ${w}`);
    }
  }
});

// ---- layout -----------------------------------------------------------------------------------------

Deno.test("sliceRows and concatRows copy row ranges and reassemble them", async () => {
  for (const be of backends) {
    const shape = [7, 3, 2], inner = 6;
    const [x, X] = rand(be, shape, 28);
    const cuts = [0, 2, 3, 7];
    const parts = cuts.slice(1).map((end, i) => ops.sliceRows(x, cuts[i], end));
    for (let i = 0; i < parts.length; i++) {
      assert.deepEqual(parts[i].shape, [cuts[i + 1] - cuts[i], 3, 2]);
      assertClose(
        await parts[i].toArray(),
        X.subarray(cuts[i] * inner, cuts[i + 1] * inner),
        0,
        `slice ${i}`,
      );
    }
    const whole = ops.concatRows(parts);
    assert.deepEqual(whole.shape, shape);
    assertClose(await read(whole), X, 0, `concat ${be.name}`);
    // A slice is a copy: changing it leaves x alone.
    ops.fillInPlace(parts[0], 9);
    assertClose(await x.toArray(), X, 0, `source untouched ${be.name}`);
    for (const t of [x, ...parts]) t.dispose();
  }
});

function naivePermute(X: ArrayLike<number>, shape: number[], perm: number[]): Float64Array {
  const rank = shape.length, outShape = perm.map((p) => shape[p]);
  const out = new Float64Array(X.length);
  const idx = new Array(rank).fill(0);
  for (let o = 0; o < X.length; o++) {
    let rem = o;
    for (let d = rank - 1; d >= 0; d--) {
      idx[d] = rem % outShape[d];
      rem = Math.floor(rem / outShape[d]);
    }
    const inIdx = new Array(rank);
    for (let d = 0; d < rank; d++) inIdx[perm[d]] = idx[d];
    let flat = 0;
    for (let d = 0; d < rank; d++) flat = flat * shape[d] + inIdx[d];
    out[o] = X[flat];
  }
  return out;
}

function permutations(n: number): number[][] {
  if (n === 0) return [[]];
  return permutations(n - 1).flatMap((p) =>
    Array.from({ length: n }, (_, i) => [...p.slice(0, i), n - 1, ...p.slice(i)])
  );
}

Deno.test("permute: every permutation up to rank 4, and ranks 5 and 6, equal the index formula", async () => {
  const shapes = [[5], [3, 4], [2, 3, 4], [2, 1, 3, 4], [2, 3, 1, 2, 3], [2, 1, 3, 2, 2, 3]];
  for (const be of backends) {
    for (const shape of shapes) {
      const [x, X] = rand(be, shape, 29);
      const perms = shape.length <= 4
        ? permutations(shape.length)
        : [shape.map((_, i) => shape.length - 1 - i), [
          1,
          0,
          ...shape.slice(2).map((_, i) => i + 2),
        ], [
          ...shape.slice(1).map((_, i) => i + 1),
          0,
        ]];
      for (const perm of perms) {
        const y = ops.permute(x, perm);
        assert.deepEqual(y.shape, perm.map((p) => shape[p]));
        assertClose(
          await read(y),
          naivePermute(X, shape, perm),
          0,
          `${be.name} [${shape}] perm [${perm}]`,
        );
      }
      x.dispose();
    }
  }
});

// ---- memory accounting --------------------------------------------------------------------------------

Deno.test("memory: live bytes rise on allocation and fall on dispose; views share storage; peak", async () => {
  for (const be of backends) {
    // Other backends may round buffers up; the CPU counts exactly 4 bytes per element.
    const exact = be.name === "cpu";
    const grew = (from: number, bytes: number, what: string) => {
      const d = be.memory.liveBytes - from;
      if (exact) assert.equal(d, bytes, `${be.name} ${what}`);
      else assert.ok(d >= bytes, `${be.name} ${what}: grew ${d} < ${bytes}`);
    };
    const base = be.memory.liveBytes;
    be.memory.resetPeak();
    assert.equal(be.memory.peakBytes, base);

    const x = be.zeros([4, 8]);
    grew(base, 128, "zeros");
    const afterX = be.memory.liveBytes;
    const view = x.reshape([32]);
    assert.equal(be.memory.liveBytes, afterX, `${be.name}: a view allocates nothing`);
    x.dispose();
    assert.equal(be.memory.liveBytes, afterX, `${be.name}: storage lives while a view does`);
    assert.equal((await view.toArray()).length, 32);
    assert.equal(be.memory.liveBytes, afterX, `${be.name}: reading allocates nothing live`);
    view.dispose();
    assert.equal(be.memory.liveBytes, base, `${be.name}: freed with the last view`);

    const a = be.fromData(new Float32Array(10), [10]);
    const y = ops.relu(a);
    grew(base, 80, "fromData + op output");
    const peak = be.memory.peakBytes;
    assert.ok(peak >= be.memory.liveBytes);
    a.dispose();
    y.dispose();
    assert.equal(be.memory.liveBytes, base, `${be.name}: all freed`);
    assert.equal(be.memory.peakBytes, peak, `${be.name}: peak kept after frees`);
    be.memory.resetPeak();
    assert.equal(be.memory.peakBytes, base, `${be.name}: resetPeak`);

    const lx = be.zeros([3, 4]), lg = up(be, [1, 1, 1, 1], [4]), lb = be.zeros([4]);
    const inputs = be.memory.liveBytes;
    const ln = ops.layerNorm(lx, lg, lb);
    grew(inputs, (12 + 3 + 3) * 4, "layerNorm output, mean and rstd");
    for (const t of [lx, lg, lb, ln.y, ln.mean, ln.rstd]) t.dispose();
    assert.equal(be.memory.liveBytes, base, `${be.name}: layerNorm freed`);
    await be.sync();
  }
});

Deno.test("MemoryTracker: counts, peak, and a release beyond live bytes is refused", () => {
  const m = new MemoryTracker();
  m.alloc(100);
  m.alloc(50);
  m.free(100);
  assert.equal(m.liveBytes, 50);
  assert.equal(m.peakBytes, 150);
  assert.equal(m.allocCount, 2);
  assert.equal(m.freeCount, 1);
  m.resetPeak();
  assert.equal(m.peakBytes, 50);
  assert.throws(
    () => m.free(51),
    (e: unknown) => e instanceof RangeError && /51.*50/.test(e.message),
  );
  assert.equal(m.liveBytes, 50);
});

Deno.test("close: a closed CPU backend refuses every further op with a TypeError; dispose stays harmless", async () => {
  const be = new CpuBackend();
  const other = new CpuBackend();
  const x = be.fromData(new Float32Array([1, -2, 3]), [3]);
  const y = be.zeros([3]);
  assert.equal(be.closed, false);
  assert.equal(be.close(), undefined, "nothing to wait for on the CPU");
  assert.equal(be.closed, true);
  be.close(); // idempotent
  const closed = (e: unknown) => e instanceof TypeError && /close\(\)/.test(e.message);
  // The backend's own entry points.
  assert.throws(() => be.fromData(new Float32Array(2), [2]), closed);
  assert.throws(() => be.zeros([2]), closed);
  assert.throws(() => be.full([2], 1), closed);
  assert.throws(() => be.readSync(x), closed);
  await assert.rejects(() => be.read(x), closed);
  await assert.rejects(() => be.sync(), closed);
  assert.throws(() => be.axpyInPlace(y, 1, x), closed, "an in-place kernel called directly");
  // Through the tensor and the ops: the op and the argument are named.
  await assert.rejects(() => x.toArray(), closed);
  assert.throws(() => x.tryToArraySync(), closed);
  assert.throws(
    () => ops.relu(x),
    (e) => e instanceof TypeError && /^relu: x is on cpu#\d+, which was closed/.test(e.message),
  );
  assert.throws(
    () => ops.axpyInPlace(y, 2, x),
    (e) =>
      e instanceof TypeError && /axpyInPlace: y is on cpu#\d+, which was closed/.test(e.message),
  );
  assert.throws(
    () => ops.full(be, [2], 1),
    (e) => e instanceof TypeError && /^full: backend cpu#\d+ was closed/.test(e.message),
  );
  // Storage is untouched by the refused calls, and releasing is allowed.
  assert.equal(be.memory.liveBytes, 24);
  x.dispose();
  y.dispose();
  assert.equal(be.memory.liveBytes, 0);
  // Another backend is not affected.
  assert.deepEqual(
    await ops.relu(other.fromData(new Float32Array([-1, 1]), [2])).toArray(),
    new Float32Array([0, 1]),
  );
});
