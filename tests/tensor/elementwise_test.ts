/**
 * The elementwise ops against their definitions on every backend:
 * broadcasting binary ops (add, sub, mul, div, maximum) and `where` against
 * a naive broadcasting reference written here, `sumToShape` against naive
 * sums, `exp` / `log` / `sigmoid` / `silu` with their special values,
 * `full` / `ones`; the gradients by central finite differences (CPU); and
 * the argument errors.
 *
 * Tolerances: the CPU rounds each f64 result to f32 once, so one-op results
 * equal the reference exactly there; WebGPU is held to 1e-6 relative for
 * the arithmetic ops (llvmpipe rounds correctly; GPUs may use up to 2.5 ULP
 * for division) and 1e-5 for the transcendental ones.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend, Shape } from "../../src/tensor/backend.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { assertClose, assertThrowsWith, fdGrad, lcgData, take } from "./_helpers.ts";
import { label, testBackends } from "./_backends.ts";

const backends = await testBackends();
const cpu = new CpuBackend();
const FD_TOL = 2e-3;

function size(shape: Shape): number {
  return shape.reduce((a, b) => a * b, 1);
}

function arith(be: Backend): number {
  return be.name === "cpu" ? 0 : 1e-6;
}

/** Broadcast shape by the NumPy rule, written out independently of the library. */
function naiveBroadcastShape(a: Shape, b: Shape): number[] {
  const r = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < r; i++) {
    const da = a[a.length - r + i] ?? 1, db = b[b.length - r + i] ?? 1;
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** Flat index into `shape` (right-aligned in `out`) of output multi-index `idx`. */
function sourceIndex(idx: number[], shape: Shape): number {
  let flat = 0;
  const off = idx.length - shape.length;
  for (let d = 0; d < shape.length; d++) {
    flat = flat * shape[d] + (shape[d] === 1 ? 0 : idx[off + d]);
  }
  return flat;
}

function unravel(i: number, shape: Shape): number[] {
  const idx = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    idx[d] = i % shape[d];
    i = Math.floor(i / shape[d]);
  }
  return idx;
}

function naiveBinary(
  f: (a: number, b: number) => number,
  A: Float32Array,
  aShape: Shape,
  B: Float32Array,
  bShape: Shape,
): Float32Array {
  const out = naiveBroadcastShape(aShape, bShape);
  const O = new Float32Array(size(out));
  for (let i = 0; i < O.length; i++) {
    const idx = unravel(i, out);
    O[i] = f(A[sourceIndex(idx, aShape)], B[sourceIndex(idx, bShape)]);
  }
  return O;
}

const PAIRS: [Shape, Shape][] = [
  [[2, 3], [2, 3]],
  [[2, 3], [3]],
  [[2, 3], [1, 3]],
  [[3], [2, 3]],
  [[2, 3], [2, 1]],
  [[4, 1, 3], [2, 1]],
  [[5, 1], [1, 7]],
  [[2, 1, 4, 1], [3, 1, 5]],
  [[], [2, 2]],
  [[1], [7]],
  [[3, 2, 4, 5], [3, 1, 4, 1]],
  [[0, 3], [3]],
  [[1, 2, 1, 2, 1, 2, 1, 2, 1], [2, 1, 2, 1, 2, 1, 2, 1]],
];

const BINARY: [string, (a: Tensor, b: Tensor) => Tensor, (a: number, b: number) => number][] = [
  ["add", ops.add, (a, b) => a + b],
  ["sub", ops.sub, (a, b) => a - b],
  ["mul", ops.mul, (a, b) => a * b],
  ["div", ops.div, (a, b) => a / b],
  ["maximum", ops.maximum, Math.max],
];

Deno.test("binary ops broadcast as NumPy does: [C] and [1, C] rows, columns, scalars, both sides", async () => {
  for (const be of backends) {
    let seed = 1;
    for (const [aShape, bShape] of PAIRS) {
      const A = lcgData(size(aShape), seed++, -2, 2), B = lcgData(size(bShape), seed++, 0.5, 2);
      const a = be.fromData(A, aShape), b = be.fromData(B, bShape);
      for (const [name, op, f] of BINARY) {
        const y = op(a, b);
        const what = `${label(be)} ${name} [${aShape}] with [${bShape}]`;
        assert.deepEqual(y.shape, naiveBroadcastShape(aShape, bShape), `${what}: shape`);
        assertClose(await take(y), naiveBinary(f, A, aShape, B, bShape), arith(be), what);
      }
      a.dispose();
      b.dispose();
    }
  }
});

Deno.test("div follows IEEE at zero and maximum gives +0 for (0, -0) on every backend", async () => {
  for (const be of backends) {
    const a = be.fromData(Float32Array.of(1, -1, 0, -0, 0, 3), [6]);
    const b = be.fromData(Float32Array.of(0, 0, 0, 1, -0, -0), [6]);
    const q = await take(ops.div(a, b));
    assert.deepEqual([...q.subarray(0, 3)], [Infinity, -Infinity, NaN], label(be));
    assert.ok(Object.is(q[3], -0), `${label(be)}: -0 / 1 is -0`);
    assert.ok(Number.isNaN(q[4]) && q[5] === -Infinity, `${label(be)}: 0/-0, 3/-0`);
    const z = be.fromData(Float32Array.of(0, -0, -0), [3]);
    const w = be.fromData(Float32Array.of(-0, 0, -0), [3]);
    const m = await take(ops.maximum(z, w));
    assert.ok(
      Object.is(m[0], 0) && Object.is(m[1], 0) && Object.is(m[2], -0),
      `${label(be)}: ${m}`,
    );
  }
});

Deno.test("where picks a where cond is non-zero (NaN counts, -0 does not), with broadcasting", async () => {
  for (const be of backends) {
    const cond = be.fromData(Float32Array.of(1, 0, NaN, -0, -3, 0.5), [2, 3]);
    const a = be.fromData(Float32Array.of(10, 20, 30), [3]);
    const b = be.fromData(Float32Array.of(-1, -2), [2, 1]);
    const y = ops.where(cond, a, b);
    assert.deepEqual(y.shape, [2, 3]);
    assert.deepEqual([...await take(y)], [10, -1, 30, -2, 20, 30], label(be));
    // Same shapes: the vectorised path; a NaN in the unselected operand is dropped.
    const x = be.fromData(Float32Array.of(NaN, 2, 3, 4, 5), [5]);
    const c = be.fromData(Float32Array.of(0, 1, 0, 1, 0), [5]);
    const zero = be.zeros([5]);
    assert.deepEqual([...await take(ops.where(c, x, zero))], [0, 2, 0, 4, 0], label(be));
  }
});

function naiveSumToShape(X: Float32Array, xShape: Shape, shape: Shape): Float64Array {
  const O = new Float64Array(size(shape));
  for (let i = 0; i < X.length; i++) O[sourceIndex(unravel(i, xShape), shape)] += X[i];
  return O;
}

Deno.test("sumToShape sums over broadcast axes: leading, inner, trailing, all, none", async () => {
  const cases: [Shape, Shape][] = [
    [[2, 3], [3]],
    [[2, 3], [2, 1]],
    [[2, 3], [1, 3]],
    [[4, 2, 3], [2, 1]],
    [[4, 2, 3], [4, 1, 3]],
    [[3, 5], []],
    [[3, 5], [1]],
    [[3, 5], [3, 5]],
    [[70, 3, 9], [9]],
    [[2, 0, 3], [3]],
    [[2, 3], [0, 3].slice(1)],
  ];
  for (const be of backends) {
    for (const [xShape, shape] of cases) {
      const X = lcgData(size(xShape), 9, -1, 1);
      const y = ops.sumToShape(be.fromData(X, xShape), shape);
      assert.deepEqual(y.shape, shape);
      const want = naiveSumToShape(X, xShape, shape);
      assertClose(
        await take(y),
        want,
        be.name === "cpu" ? 1e-7 : 1e-5,
        `${label(be)} [${xShape}] → [${shape}]`,
      );
    }
  }
});

Deno.test("exp, log, sigmoid and silu: definitions and special values", async () => {
  const X = Float32Array.of(0, 1, -1, 3.5, -7, 20, -20, 88, 100, -100, Infinity, -Infinity);
  for (const be of backends) {
    const x = be.fromData(X, [X.length]);
    const t = be.name === "cpu" ? 1e-7 : 1e-5;
    assertClose(await take(ops.exp(x)), X.map(Math.exp), t, `${label(be)} exp`);
    const sig = (v: number) => 1 / (1 + Math.exp(-v));
    assertClose(await take(ops.sigmoid(x)), X.map(sig), t, `${label(be)} sigmoid`);
    const silu = await take(ops.silu(x));
    assertClose(
      silu.subarray(0, 10),
      X.subarray(0, 10).map((v) => v * sig(v)),
      t,
      `${label(be)} silu`,
    );
    assert.equal(silu[10], Infinity);
    const pos = be.fromData(Float32Array.of(1, Math.E, 1e-30, 1e30, 0, -0, -1, Infinity), [8]);
    const l = await take(ops.log(pos));
    assertClose(l.subarray(0, 4), [0, 1, Math.log(1e-30), Math.log(1e30)], t, `${label(be)} log`);
    assert.deepEqual([...l.subarray(4)], [-Infinity, -Infinity, NaN, Infinity], `${label(be)} log`);
    x.dispose();
    pos.dispose();
  }
});

Deno.test("full and ones: any value, NaN and ±Infinity included", async () => {
  for (const be of backends) {
    for (const v of [0, -2.5, Infinity, -Infinity, NaN]) {
      const t = ops.full(be, [3, 2], v);
      assert.deepEqual(t.shape, [3, 2]);
      assert.deepEqual([...await take(t)], new Array(6).fill(v), `${label(be)} full ${v}`);
    }
    assert.deepEqual([...await take(ops.ones(be, [2, 1]))], [1, 1]);
    assert.equal((await take(ops.full(be, [0, 4], 1))).length, 0);
  }
});

// ---- gradients by central finite differences (CPU) -------------------------------------------

async function checkFd(
  what: string,
  f: (x: Tensor) => Tensor,
  x0: Float32Array,
  shape: Shape,
  analytic: (x: Tensor, dy: Tensor) => Tensor,
): Promise<void> {
  const y = f(cpu.fromData(x0, shape));
  const dyData = lcgData(y.size, 77, -1, 1);
  const dy = cpu.fromData(dyData, y.shape);
  y.dispose();
  const x = cpu.fromData(x0, shape);
  const got = await take(analytic(x, dy));
  const want = await fdGrad(cpu, f, x0, shape, dyData);
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= FD_TOL * (1 + Math.abs(want[i])))) {
      assert.fail(`${what}[${i}]: analytic ${got[i]}, finite difference ${want[i]}`);
    }
  }
  x.dispose();
  dy.dispose();
}

Deno.test("unary gradients match finite differences: sigmoid, silu, exp (dy·y), log (dy/x)", async () => {
  const X = lcgData(12, 3, -3, 3);
  await checkFd("sigmoid", ops.sigmoid, X, [3, 4], (x, dy) => {
    const y = ops.sigmoid(x);
    const dx = ops.sigmoidBackward(y, dy);
    y.dispose();
    return dx;
  });
  await checkFd("silu", ops.silu, X, [3, 4], (x, dy) => ops.siluBackward(x, dy));
  await checkFd("exp", ops.exp, X, [3, 4], (x, dy) => {
    const y = ops.exp(x);
    const dx = ops.mul(dy, y);
    y.dispose();
    return dx;
  });
  const P = lcgData(12, 4, 0.5, 3);
  await checkFd("log", ops.log, P, [3, 4], (x, dy) => ops.div(dy, x));
});

Deno.test("broadcast gradients match finite differences: sumToShape of dy for each operand", async () => {
  const aShape = [2, 3, 4], bShape = [3, 1];
  const A = lcgData(24, 5, -2, 2), B = lcgData(3, 6, 0.5, 2);
  const a = () => cpu.fromData(A, aShape), b = () => cpu.fromData(B, bShape);
  type G = (a: Tensor, b: Tensor, dy: Tensor) => [Tensor, Tensor];
  const rules: [string, (a: Tensor, b: Tensor) => Tensor, G][] = [
    ["add", ops.add, (_a, _b, dy) => [ops.copy(dy), ops.copy(dy)]],
    ["sub", ops.sub, (_a, _b, dy) => [ops.copy(dy), ops.scale(dy, -1)]],
    ["mul", ops.mul, (a, b, dy) => [ops.mul(dy, b), ops.mul(dy, a)]],
    ["div", ops.div, (a, b, dy) => {
      const y = ops.div(a, b), yb = ops.div(y, b), q = ops.mul(dy, yb);
      const db = ops.scale(q, -1);
      for (const t of [y, yb, q]) t.dispose();
      return [ops.div(dy, b), db];
    }],
  ];
  for (const [name, op, grad] of rules) {
    for (const which of ["a", "b"] as const) {
      const shape = which === "a" ? aShape : bShape;
      const x0 = which === "a" ? A : B;
      const f = (x: Tensor) => which === "a" ? op(x, b()) : op(a(), x);
      await checkFd(`${name} d${which}`, f, x0, shape, (x, dy) => {
        const [ga, gb] = which === "a" ? grad(x, b(), dy) : grad(a(), x, dy);
        const full = which === "a" ? ga : gb;
        (which === "a" ? gb : ga).dispose();
        const g = ops.sumToShape(full, shape);
        full.dispose();
        return g;
      });
    }
  }
});

Deno.test("maximum and where gradients match finite differences (dy routed by the selection)", async () => {
  // Operands kept apart by at least 0.1 so the step 1e-2 never crosses a tie.
  const A = lcgData(8, 11, -1, 1).map((v, i) => v + (i % 2 ? 0.3 : -0.3));
  const B = lcgData(8, 12, -0.1, 0.1);
  const b = () => cpu.fromData(B, [8]);
  await checkFd("maximum da", (x) => ops.maximum(x, b()), A, [8], (_x, dy) => {
    const cond = cpu.fromData(Float32Array.from(A, (v, i) => (v > B[i] ? 1 : 0)), [8]);
    return ops.where(cond, dy, cpu.zeros([8]));
  });
  const C = Float32Array.of(1, 0, 0, 1, 1, 0, 1, 0);
  const c = () => cpu.fromData(C, [8]);
  await checkFd("where da", (x) => ops.where(c(), x, b()), A, [8], (_x, dy) => {
    return ops.where(c(), dy, cpu.zeros([1]));
  });
});

// ---- errors --------------------------------------------------------------------------------

Deno.test("broadcast errors name every shape and the conflicting dimension", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => ops.add(be.zeros([2, 3]), be.zeros([4, 3])), RangeError, [
    "add",
    "a [2, 3]",
    "b [4, 3]",
    "dimension -2",
    "2 vs 4",
  ]);
  assertThrowsWith(
    () => ops.where(be.zeros([3]), be.zeros([2, 3]), be.zeros([2])),
    RangeError,
    ["where", "cond [3]", "a [2, 3]", "b [2]"],
  );
  assertThrowsWith(() => ops.sumToShape(be.zeros([2, 3]), [2]), RangeError, [
    "sumToShape",
    "shape [2]",
    "x [2, 3]",
  ]);
  assertThrowsWith(() => ops.sumToShape(be.zeros([3]), [1, 3]), RangeError, ["[1, 3]", "[3]"]);
  const many = [2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1];
  assertThrowsWith(
    () => ops.mul(be.zeros(many), be.zeros(many.map((d) => 3 - d))),
    RangeError,
    ["mul", "at most 8"],
  );
});

Deno.test("full, ones and sumToShape refuse bad arguments naming type and length, not values", () => {
  const be = new CpuBackend();
  const huge = new Array(100000).fill(2);
  huge[5000] = -1;
  const e = assertThrowsWith(() => ops.full(be, huge, 0), RangeError, [
    "full",
    "array of length 100000",
  ]);
  assert.ok(e.message.length < 200, `message stays short: ${e.message.length} chars`);
  assertThrowsWith(() => ops.ones(be, new Float32Array(50000) as unknown as number[]), TypeError, [
    "ones",
    "Float32Array of length 50000",
  ]);
  assertThrowsWith(() => ops.full({} as Backend, [2], 1), TypeError, ["full", "backend"]);
  assertThrowsWith(() => ops.full(be, [2], "1" as unknown as number), TypeError, [
    "value",
    "string",
  ]);
  assertThrowsWith(() => ops.full(be, [2, 1.5], 0), RangeError, ["[2, 1.5]", "entry 1"]);
});
