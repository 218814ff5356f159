/**
 * Log-sum-exp and RMS norm against their definitions on every backend
 * (naive f64 references written here), their gradients against central
 * finite differences (CPU), and their argument errors.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Shape } from "../../src/tensor/backend.ts";
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

Deno.test("logSumExp: log Σ exp per row, stable at ±1000, ±Infinity rows, output drops the last dim", async () => {
  for (const be of backends) {
    for (const shape of [[1, 1], [3, 5], [2, 3, 7], [4, 130], [6]] as Shape[]) {
      const cols = shape[shape.length - 1], rows = size(shape) / cols;
      const X = lcgData(size(shape), 3, -5, 5);
      const y = ops.logSumExp(be.fromData(X, shape));
      assert.deepEqual(y.shape, shape.slice(0, -1));
      const want = new Float64Array(rows);
      for (let r = 0; r < rows; r++) {
        let s = 0;
        for (let j = 0; j < cols; j++) s += Math.exp(X[r * cols + j]);
        want[r] = Math.log(s);
      }
      assertClose(await take(y), want, be.name === "cpu" ? 1e-7 : 1e-5, `${label(be)} [${shape}]`);
    }
    const special = be.fromData(
      Float32Array.of(1000, 999, -1000, -1001, -Infinity, -Infinity, Infinity, 0, -Infinity, 3),
      [5, 2],
    );
    const got = await take(ops.logSumExp(special));
    const want = [1000 + Math.log1p(Math.exp(-1)), -1000 + Math.log1p(Math.exp(-1)), -Infinity];
    assertClose(got.subarray(0, 3), want, 1e-6, `${label(be)} special rows`);
    assert.equal(got[3], Infinity);
    assert.ok(Math.abs(got[4] - 3) < 1e-6, `${label(be)}: [-inf, 3] → 3, got ${got[4]}`);
  }
});

Deno.test("logSumExpBackward matches finite differences (the row softmax times dy)", async () => {
  const X = lcgData(12, 4, -3, 3);
  const dyData = lcgData(3, 5, -1, 1);
  const x = cpu.fromData(X, [3, 4]);
  const y = ops.logSumExp(x);
  const got = await take(ops.logSumExpBackward(x, y, cpu.fromData(dyData, [3])));
  const want = await fdGrad(cpu, ops.logSumExp, X, [3, 4], dyData);
  assertClose(got, want, FD_TOL, "logSumExpBackward");
});

function naiveRms(X: Float32Array, W: Float32Array, rows: number, n: number, eps: number) {
  const y = new Float64Array(X.length), rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let j = 0; j < n; j++) ss += X[r * n + j] ** 2;
    rstd[r] = 1 / Math.sqrt(ss / n + eps);
    for (let j = 0; j < n; j++) y[r * n + j] = X[r * n + j] * rstd[r] * W[j];
  }
  return { y, rstd };
}

Deno.test("rmsNorm: y = x / sqrt(mean(x²) + eps) · w per row, rstd per row", async () => {
  for (const be of backends) {
    for (const shape of [[1, 1], [3, 5], [2, 3, 8], [4, 130]] as Shape[]) {
      const n = shape[shape.length - 1], rows = size(shape) / n;
      const X = lcgData(size(shape), 6, -2, 2), W = lcgData(n, 7, 0.5, 1.5);
      const { y, rstd } = ops.rmsNorm(be.fromData(X, shape), be.fromData(W, [n]), 1e-5);
      const want = naiveRms(X, W, rows, n, 1e-5);
      const t = be.name === "cpu" ? 1e-6 : 1e-5;
      assertClose(await take(y), want.y, t, `${label(be)} y [${shape}]`);
      assertClose(await take(rstd), want.rstd, t, `${label(be)} rstd [${shape}]`);
    }
  }
});

Deno.test("rmsNorm I and W gradients match finite differences", async () => {
  const shape = [3, 5], n = 5;
  const X = lcgData(15, 8, -2, 2), W = lcgData(n, 9, 0.5, 1.5);
  const dyData = lcgData(15, 10, -1, 1);
  const x = cpu.fromData(X, shape), w = cpu.fromData(W, [n]), dy = cpu.fromData(dyData, shape);
  const { rstd } = ops.rmsNorm(x, w);
  const dx = await take(ops.rmsNormBackwardInput(dy, x, rstd, w));
  const fx = (xt: Tensor) => {
    const r = ops.rmsNorm(xt, w);
    r.rstd.dispose();
    return r.y;
  };
  assertClose(dx, await fdGrad(cpu, fx, X, shape, dyData), FD_TOL, "rmsNorm dx");
  const dw = await take(ops.rmsNormBackwardWeight(dy, x, rstd));
  const fw = (wt: Tensor) => {
    const r = ops.rmsNorm(x, wt);
    r.rstd.dispose();
    return r.y;
  };
  assertClose(dw, await fdGrad(cpu, fw, W, [n], dyData), FD_TOL, "rmsNorm dw");
});

Deno.test("logSumExp and rmsNorm refuse bad shapes and eps, naming them", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => ops.logSumExp(be.zeros([3, 0])), RangeError, ["logSumExp", "[3, 0]"]);
  const x = be.zeros([2, 4]);
  assertThrowsWith(() => ops.rmsNorm(x, be.zeros([3])), RangeError, [
    "rmsNorm",
    "weight",
    "[4]",
    "[3]",
  ]);
  assertThrowsWith(() => ops.rmsNorm(x, be.zeros([4]), -1), RangeError, ["eps", "-1"]);
  const { rstd } = ops.rmsNorm(x, be.zeros([4]));
  assertThrowsWith(
    () => ops.rmsNormBackwardInput(be.zeros([2, 3]), x, rstd, be.zeros([4])),
    RangeError,
    [
      "dy [2, 3]",
      "x [2, 4]",
    ],
  );
  assertThrowsWith(() => ops.logSumExpBackward(x, be.zeros([3]), be.zeros([2])), RangeError, [
    "logSumExpBackward",
    "y must have shape [2]",
  ]);
});
