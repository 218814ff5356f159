/**
 * The CPU backend's fast mode (WebAssembly SIMD kernels, f32 sums, threads)
 * against its exact mode (the f64 reference loops), kernel by kernel, over
 * shapes that include 1, primes and non-multiples of the matmul's tiles
 * (6 × 8 micro-tiles, 96 × 256 tasks, K blocks of 256), each transpose,
 * batched and shared operands, and NaN / ±Inf in the inputs; both builds
 * (relaxed SIMD and SIMD128); the same bits whatever the thread count and
 * whatever the rows around an output (a pipeline's micro-batch equals its
 * rows of the whole batch).
 */

import assert from "node:assert/strict";
import type { Backend, Shape } from "../../src/tensor/backend.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { wasmModule } from "../../src/tensor/cpu/_wasm_module.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { lcgData } from "./_helpers.ts";

const VARIANTS = (["relaxed", "simd128"] as const).filter((v) => {
  const ok = wasmModule(v) !== null;
  if (!ok) console.log(`cpu_fast_test: SKIPPED the ${v} build (this engine does not run it)`);
  return ok;
});

const exact = new CpuBackend({ exact: true });

/** Values in [-1, 1), with NaN, +Inf, -Inf planted at the given indices. */
function values(n: number, seed: number, specials: Record<number, number> = {}): Float32Array {
  const d = lcgData(n, seed);
  for (const [i, v] of Object.entries(specials)) if (Number(i) < n) d[Number(i)] = v;
  return d;
}

function on(be: Backend, d: Float32Array, shape: Shape): Tensor {
  return be.fromData(d, shape);
}

function read(t: Tensor): Float32Array {
  return (t.backend as CpuBackend).readSync(t);
}

/**
 * Asserts `got` equals `want` where `want` is NaN or infinite (same class,
 * same sign) and within `tol(i)` elsewhere.
 */
function assertNear(
  got: Float32Array,
  want: Float32Array,
  tol: (i: number) => number,
  what: string,
): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const g = got[i], w = want[i];
    if (Number.isNaN(w) || !Number.isFinite(w)) {
      assert.ok(
        Object.is(g, w) || (Number.isNaN(g) && Number.isNaN(w)),
        `${what}[${i}]: ${g}, want ${w}`,
      );
      continue;
    }
    assert.ok(Math.abs(g - w) <= tol(i), `${what}[${i}]: ${g}, want ${w} (tolerance ${tol(i)})`);
  }
}

const U = 2 ** -24; // unit roundoff of f32

// ---- matmul ------------------------------------------------------------------

interface MatmulCase {
  batch: number;
  m: number;
  k: number;
  n: number;
  transA: boolean;
  transB: boolean;
  shared: boolean;
}

function matmulCases(): MatmulCase[] {
  const dims: [number, number, number][] = [
    [1, 1, 1],
    [1, 7, 1],
    [5, 1, 9],
    [6, 3, 8],
    [7, 13, 9],
    [13, 257, 17],
    [97, 31, 263],
    [101, 300, 7],
    [12, 0, 5],
  ];
  const out: MatmulCase[] = [];
  for (const [m, k, n] of dims) {
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        out.push({ batch: 1, m, k, n, transA, transB, shared: true });
      }
    }
  }
  out.push({ batch: 3, m: 11, k: 19, n: 10, transA: false, transB: true, shared: false });
  out.push({ batch: 4, m: 9, k: 5, n: 33, transA: true, transB: false, shared: true });
  return out;
}

function matmulOn(be: Backend, c: MatmulCase, A: Float32Array, Bd: Float32Array): Float32Array {
  const aShape = [...(c.batch > 1 ? [c.batch] : []), ...(c.transA ? [c.k, c.m] : [c.m, c.k])];
  const bCore = c.transB ? [c.n, c.k] : [c.k, c.n];
  const bShape = c.shared ? bCore : [c.batch, ...bCore];
  const a = on(be, A, aShape), b = on(be, Bd, bShape);
  const out = read(be.matmul(a, b, c.transA, c.transB));
  return out;
}

/** Σ_k |a_ik| |b_kj| per output: the scale of each output's rounding error. */
function absProducts(c: MatmulCase, A: Float32Array, Bd: Float32Array): Float32Array {
  const out = new Float32Array(c.batch * c.m * c.n);
  for (let e = 0; e < c.batch; e++) {
    for (let i = 0; i < c.m; i++) {
      for (let j = 0; j < c.n; j++) {
        let s = 0;
        for (let k = 0; k < c.k; k++) {
          const a = c.transA ? A[e * c.m * c.k + k * c.m + i] : A[e * c.m * c.k + i * c.k + k];
          const bo = c.shared ? 0 : e * c.k * c.n;
          const b = c.transB ? Bd[bo + j * c.k + k] : Bd[bo + k * c.n + j];
          s += Math.abs(a * b);
        }
        out[(e * c.m + i) * c.n + j] = s;
      }
    }
  }
  return out;
}

for (const variant of VARIANTS) {
  Deno.test(`cpu fast (${variant}): matmul equals the exact f64 sums within K·u·Σ|ab|, every shape and transpose`, () => {
    const be = new CpuBackend({ simd: variant, threads: 1 });
    for (const c of matmulCases()) {
      const A = values(c.batch * c.m * c.k, 1 + c.m);
      const Bd = values((c.shared ? 1 : c.batch) * c.k * c.n, 2 + c.n);
      const got = matmulOn(be, c, A, Bd), want = matmulOn(exact, c, A, Bd);
      const scale = absProducts(c, A, Bd);
      assertNear(got, want, (i) => (c.k + 2) * U * scale[i] + 1e-30, `matmul ${JSON.stringify(c)}`);
    }
    be.close();
  });

  Deno.test(`cpu fast (${variant}): matmul with NaN and ±Inf gives NaN and ±Inf where the exact sums do`, () => {
    const be = new CpuBackend({ simd: variant, threads: 1 });
    for (const c of matmulCases().filter((c) => c.k > 0 && c.m * c.n > 1)) {
      const A = values(c.batch * c.m * c.k, 3, { 0: NaN, 5: Infinity, 11: -Infinity });
      const Bd = values((c.shared ? 1 : c.batch) * c.k * c.n, 4, { 2: Infinity, 7: NaN });
      const got = matmulOn(be, c, A, Bd), want = matmulOn(exact, c, A, Bd);
      assert.ok(want.some((v) => !Number.isFinite(v)), "the case has specials");
      assertNear(got, want, () => (c.k + 2) * U * c.k, `matmul ${JSON.stringify(c)}`);
    }
    be.close();
  });
}

Deno.test("cpu fast: matmul's rows are the same bits alone or within a larger batch (micro-batch = its rows of the batch; 1 to 4 rows skip the packing)", () => {
  for (const threads of [1, 2]) {
    const be = new CpuBackend({ threads });
    const k = 300, n = 37, m = 50;
    const A = values(m * k, 5, { 17: NaN }), Bd = values(k * n, 6);
    for (const transB of [false, true]) {
      const b = on(be, Bd, transB ? [n, k] : [k, n]);
      const whole = read(be.matmul(on(be, A, [m, k]), b, false, transB));
      for (const [lo, hi] of [[0, 1], [1, 3], [3, 7], [3, 10], [7, 50], [43, 50]]) {
        const part = read(
          be.matmul(on(be, A.slice(lo * k, hi * k), [hi - lo, k]), b, false, transB),
        );
        assert.deepEqual(part, whole.slice(lo * n, hi * n), `rows ${lo}..${hi}, transB ${transB}`);
      }
    }
    be.close();
  }
});

// ---- elementwise -------------------------------------------------------------

const SPECIALS = { 0: NaN, 1: Infinity, 2: -Infinity, 3: 0, 4: -0, 5: 80, 6: -80, 7: 1e-8, 8: -9 };

for (const variant of VARIANTS) {
  Deno.test(`cpu fast (${variant}): activations and their gradients equal the exact ones (NaN, ±Inf, ±0, large and tiny)`, () => {
    const be = new CpuBackend({ simd: variant, threads: 1 });
    for (const n of [1, 3, 4, 5, 97, 16384 + 7]) {
      const x = values(n, 7 + n, SPECIALS).map((v, i) => i > 8 ? v * 12 : v);
      for (const op of ["relu", "gelu", "tanh", "sigmoid", "silu", "exp", "log"] as const) {
        const got = read(be.unary(op, on(be, x, [n]))),
          want = read(exact.unary(op, on(exact, x, [n])));
        assertNear(got, want, (i) => 4e-7 * Math.abs(want[i]) + 1e-7, `${op} n=${n}`);
      }
      const dy = values(n, 8, { 9: NaN }).map((v) => 3 * v);
      for (const op of ["relu", "gelu", "tanh", "sigmoid", "silu"] as const) {
        // tanh and sigmoid take their output y, the others x.
        const v = op === "tanh" || op === "sigmoid" ? read(exact.unary(op, on(exact, x, [n]))) : x;
        const got = read(be.unaryBackward(op, on(be, v, [n]), on(be, dy, [n])));
        const want = read(exact.unaryBackward(op, on(exact, v, [n]), on(exact, dy, [n])));
        // Gradients cancel near their zeros: an absolute floor at the inputs' scale.
        assertNear(
          got,
          want,
          (i) => 1e-6 * Math.abs(want[i]) + 2e-7 * (1 + Math.abs(dy[i])),
          `${op}' n=${n}`,
        );
      }
    }
    be.close();
  });
}

// ---- layout ------------------------------------------------------------------

for (const variant of VARIANTS) {
  Deno.test(`cpu fast (${variant}): broadcasting binary ops and permutations equal the exact ones, bit for bit`, () => {
    const be = new CpuBackend({ simd: variant, threads: 1 });
    const pairs: [Shape, Shape][] = [
      [[5], [5]],
      [[7, 3], [7, 3]],
      [[7, 3], [3]],
      [[7, 3], [7, 1]],
      [[1], [4, 9]],
      [[2, 1, 5], [3, 1]],
      [[2, 3, 4, 5], [1, 3, 1, 5]],
      [[2, 1, 2, 1, 2, 1, 3], [1, 2, 1, 2, 1, 2, 1]], // rank 7 after merging: the loop fallback
      [[16400], [16400]],
    ];
    for (const [sa, sb] of pairs) {
      const a = values(sa.reduce((x, y) => x * y, 1), 1, { 1: NaN, 2: Infinity });
      const b = values(sb.reduce((x, y) => x * y, 1), 2, { 0: -Infinity });
      const rank = Math.max(sa.length, sb.length);
      const pad = (s: Shape) => [...new Array(rank - s.length).fill(1), ...s];
      const out = pad(sa).map((e, d) => Math.max(e, pad(sb)[d]));
      for (const op of ["add", "sub", "mul", "div", "maximum"] as const) {
        const run = (x: CpuBackend) => read(x.binary(op, on(x, a, sa), on(x, b, sb), out));
        const got = run(be), want = run(exact);
        assert.equal(got.length, want.length);
        for (let i = 0; i < want.length; i++) {
          assert.ok(
            Object.is(got[i], want[i]) || (got[i] === 0 && want[i] === 0),
            `${op} ${sa} ${sb} [${i}]: ${got[i]} vs ${want[i]}`,
          );
        }
      }
    }
    const perms: [Shape, number[]][] = [
      [[3, 4], [1, 0]],
      [[2, 3, 4, 5], [0, 2, 1, 3]],
      [[2, 3, 1, 5], [3, 2, 0, 1]],
      [[2, 5, 3, 4, 8], [2, 0, 3, 1, 4]],
      [[1, 1, 1], [2, 1, 0]],
      [[3, 0, 2], [2, 0, 1]],
      [[2, 2, 2, 2, 2, 2, 2], [6, 5, 4, 3, 2, 1, 0]],
    ];
    for (const [shape, perm] of perms) {
      const x = values(shape.reduce((p, q) => p * q, 1), 3, { 0: NaN });
      const run = (b: CpuBackend) => read(b.permute(on(b, x, shape), perm));
      assert.deepEqual(run(be), run(exact), `permute ${shape} by ${perm}`);
    }
    be.close();
  });
}

// ---- rows --------------------------------------------------------------------

const ROW_SHAPES: [number, number][] = [[1, 1], [3, 4], [2, 5], [17, 31], [5, 64], [3, 257], [
  70,
  3,
]];

for (const variant of VARIANTS) {
  Deno.test(`cpu fast (${variant}): softmax, layer norm, column sums, bias and their gradients equal the exact ones`, () => {
    const be = new CpuBackend({ simd: variant, threads: 1 });
    for (const [rows, n] of ROW_SHAPES) {
      const shape = [rows, n];
      const x = values(rows * n, rows + n).map((v) => 4 * v);
      const dy = values(rows * n, 3 * rows + n);
      const gamma = values(n, n + 1), beta = values(n, n + 2);
      const both = <T>(f: (b: CpuBackend) => T): [T, T] => [f(be), f(exact)];
      const near = (g: Float32Array, w: Float32Array, what: string, scale = 1) =>
        assertNear(g, w, (i) => 2e-6 * (scale + Math.abs(w[i])), `${what} [${rows}, ${n}]`);
      for (const causal of [false, true]) {
        if (causal && rows % n !== 0 && rows > n) continue;
        const [g, w] = both((b) => read(b.softmax(on(b, x, shape), causal)));
        near(g, w, `softmax causal=${causal}`);
        const [gb, wb] = both((b) => read(b.softmaxBackward(on(b, w, shape), on(b, dy, shape))));
        near(gb, wb, "softmax'");
      }
      const [ln, lnw] = both((b) => {
        const r = b.layerNorm(on(b, x, shape), on(b, gamma, [n]), on(b, beta, [n]), 1e-5);
        return [read(r.y), read(r.mean), read(r.rstd)];
      });
      near(ln[0], lnw[0], "layerNorm y", 4);
      near(ln[1], lnw[1], "layerNorm mean", 4);
      near(ln[2], lnw[2], "layerNorm rstd", 4);
      const stats = (b: CpuBackend) => ({
        mean: on(b, lnw[1], [rows]),
        rstd: on(b, lnw[2], [rows]),
      });
      const [gi, wi] = both((b) =>
        read(
          b.layerNormBackwardInput(on(b, dy, shape), on(b, x, shape), stats(b), on(b, gamma, [n])),
        )
      );
      near(gi, wi, "layerNorm' input", 4 * n);
      const [gw, ww] = both((b) => {
        const r = b.layerNormBackwardWeight(on(b, dy, shape), on(b, x, shape), stats(b));
        return [read(r.dgamma), read(r.dbeta)];
      });
      near(gw[0], ww[0], "layerNorm' gamma", 4 * rows);
      near(gw[1], ww[1], "layerNorm' beta", rows);
      const [gs, ws] = both((b) => read(b.sumRows(on(b, x, shape))));
      near(gs, ws, "sumRows", 4 * rows);
      const [ga, wa] = both((b) => read(b.addBias(on(b, x, shape), on(b, beta, [n]))));
      assert.deepEqual(ga, wa, `addBias [${rows}, ${n}]`);
    }
    be.close();
  });

  Deno.test(`cpu fast (${variant}): a NaN or ±Inf in a row gives what the exact row ops give`, () => {
    const be = new CpuBackend({ simd: variant, threads: 1 });
    const rows = 4, n = 9, shape = [rows, n];
    const x = values(rows * n, 9, { 2: NaN, 12: Infinity, 22: -Infinity });
    const run = (b: CpuBackend) => [
      read(b.softmax(on(b, x, shape), false)),
      read(
        b.layerNorm(on(b, x, shape), on(b, values(n, 1), [n]), on(b, values(n, 2), [n]), 1e-5).y,
      ),
      read(b.sumRows(on(b, x, shape))),
    ];
    const [g, w] = [run(be), run(exact)];
    for (let k = 0; k < g.length; k++) assertNear(g[k], w[k], () => 1e-5, `op ${k}`);
    be.close();
  });

  Deno.test(`cpu fast (${variant}): AdamW's step equals the exact one`, () => {
    const be = new CpuBackend({ simd: variant, threads: 1 });
    for (const n of [1, 5, 16384 + 3]) {
      const p0 = values(n, 1),
        g = values(n, 2, { 3: NaN }),
        m0 = values(n, 3),
        v0 = values(n, 4).map(Math.abs);
      const hp = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, step: 3 };
      const run = (b: CpuBackend) => {
        const [p, m, v] = [on(b, p0, [n]), on(b, m0, [n]), on(b, v0, [n])];
        b.adamwInPlace(p, on(b, g, [n]), m, v, hp);
        return [read(p), read(m), read(v)];
      };
      const [got, want] = [run(be), run(exact)];
      for (let k = 0; k < 3; k++) {
        assertNear(
          got[k],
          want[k],
          (i) => 4e-6 * (Math.abs(want[k][i]) + 1e-2),
          `adamw ${k} n=${n}`,
        );
      }
    }
    be.close();
  });
}

// ---- threads -----------------------------------------------------------------

Deno.test("cpu fast: the same bits on 1, 2 and 3 threads (matmul, activations, row ops, AdamW)", () => {
  const run = (threads: number) => {
    const be = new CpuBackend({ threads });
    const A = values(200 * 300, 1), Bd = values(300 * 190, 2);
    const x = values(600 * 257, 3).map((v) => 5 * v);
    const shape = [600, 257];
    const out = [
      read(be.matmul(on(be, A, [200, 300]), on(be, Bd, [300, 190]), false, false)),
      read(be.matmul(on(be, A, [300, 200]), on(be, Bd, [190, 300]), true, true)),
      read(be.unary("gelu", on(be, x, shape))),
      read(be.unaryBackward("gelu", on(be, x, shape), on(be, x, shape))),
      read(be.softmax(on(be, x, shape), false)),
      read(
        be.layerNorm(
          on(be, x, shape),
          on(be, values(257, 4), [257]),
          on(be, values(257, 5), [257]),
          1e-5,
        ).y,
      ),
      read(be.sumRows(on(be, x, shape))),
    ];
    const p = on(be, x, [x.length]);
    be.adamwInPlace(p, on(be, x, [x.length]), be.zeros([x.length]), be.zeros([x.length]), {
      lr: 1e-3,
      beta1: 0.9,
      beta2: 0.99,
      eps: 1e-8,
      weightDecay: 0,
      step: 1,
    });
    out.push(read(p));
    be.close();
    return out;
  };
  const one = run(1);
  for (const threads of [2, 3]) {
    const many = run(threads);
    for (let k = 0; k < one.length; k++) {
      assert.deepEqual(many[k], one[k], `op ${k}, ${threads} threads`);
    }
  }
});

Deno.test("cpu fast: a backend reports its mode, build and threads; exact is the reference", () => {
  const be = new CpuBackend({ threads: 2 });
  assert.equal(be.exact, false);
  assert.equal(be.threads, 2);
  assert.match(be.description, /WebAssembly (relaxed SIMD|SIMD128), 2 threads/);
  be.close();
  assert.equal(exact.exact, true);
  assert.equal(exact.threads, 1);
  assert.throws(
    () => new CpuBackend({ threads: 0 }),
    /threads must be an integer from 1 to 1024, got 0/,
  );
  assert.throws(
    () => new CpuBackend({ threads: "2" as never }),
    /threads must be a number of threads, got "2"/,
  );
  assert.throws(
    () => new CpuBackend({ simd: "avx" as never }),
    /simd must be "relaxed" or "simd128", got "avx"/,
  );
  assert.throws(() => new CpuBackend({ thread: 2 } as never), /did you mean "threads"\?/);
});

// ---- memory --------------------------------------------------------------------

Deno.test("cpu fast: a tensor past the 4 GiB a WebAssembly memory holds is refused, naming the limit and the way out", () => {
  const be = new CpuBackend({ threads: 1 });
  const x = be.zeros([1000]);
  assert.throws(() => be.zeros([2 ** 30 + 1]), (e: Error) => {
    assert.ok(e instanceof RangeError);
    assert.match(e.message, /at most 4 GiB/);
    assert.match(e.message, /exact: true/);
    return true;
  });
  // The backend is still usable.
  assert.deepEqual(read(be.unary("exp", x)), new Float32Array(1000).fill(1));
  be.close();
});

Deno.test("cpu fast: disposed storage serves the next tensors (same size, then merged for other sizes), zeroed", () => {
  const be = new CpuBackend({ threads: 1, poolBytes: 1 << 20 });
  const a = be.full([4096], 7);
  a.dispose();
  const created = be.pool.created;
  const b = be.zeros([4096]);
  assert.equal(be.pool.created, created, "reused, not created");
  assert.equal(be.pool.reused, 1);
  assert.ok(read(b).every((v) => v === 0), "zeroed");
  b.dispose();
  // Past the pool limit idle blocks merge: many small ones serve a large one.
  const small = Array.from({ length: 64 }, () => be.full([4096], 3));
  const top = be.pool.allocatedBytes;
  for (const t of small) t.dispose();
  const big = be.zeros([64 * 4096]);
  assert.ok(read(big).every((v) => v === 0));
  assert.ok(be.pool.allocatedBytes <= top + 64 * 4096 * 4, "no more than one new big block");
  big.dispose();
  be.close();
});

// ---- processes -------------------------------------------------------------------

Deno.test("cpu fast: a script that never closes its 2-thread backend exits by itself, with no permission at all", async () => {
  const url = new URL("../../src/tensor/cpu/backend.ts", import.meta.url).href;
  const code = `import { CpuBackend } from ${JSON.stringify(url)};
const be = new CpuBackend({ threads: 2 });
const a = be.full([400, 400], 1);
const c = be.matmul(a, a, false, false);
console.log(be.readSync(c)[0], be.description);`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "--quiet", "-"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(code));
  await w.close();
  // A liveness ceiling: the run takes well under a second.
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const out = await child.output();
  clearTimeout(timer);
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, text);
  assert.match(text, /^400 CPU \(WebAssembly .*, 2 threads\)/);
});
