/**
 * The WebGPU backend against the CPU reference, kernel by kernel, on random
 * shapes that are not multiples of any tile (including 1×N and N×1), plus
 * the backend's own machinery: the buffer pool and memory accounting, use
 * after dispose or destroy, many dispatches before one read, concurrent
 * reads, 2-D dispatch past 65535 workgroups, the matmul variants and their
 * autotune, and `createBackend`'s fallback.
 *
 * Tolerances (stated once, used everywhere):
 * - elementwise and row-wise ops: |gpu − cpu| ≤ 1e-5 + 1e-4·|cpu|
 *   (f32 on the GPU against f64-accumulated, f32-rounded values on the CPU);
 * - long sums (matmul, column sums, sum, sum of squares, layer-norm weight
 *   gradients): |gpu − cpu| ≤ 1e-6 + 1e-5·Σ|terms|, the natural scale of
 *   f32 rounding in a sum whatever its cancellation;
 * - ops that move data without arithmetic (copy, slices, permute,
 *   embedding gather and scatter-add, relu): exactly equal.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { createBackend } from "../../src/tensor/create_backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { Backend, Shape } from "../../src/tensor/backend.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { type MatmulConfig, WebGPUBackend } from "../../src/tensor/webgpu/mod.ts";
import {
  candidateConfigs,
  clearConfigCache,
  defaultConfig,
  LARGE_MATMUL_OUTPUTS,
} from "../../src/tensor/webgpu/_matmul_config.ts";
import { specialize } from "../../src/tensor/webgpu/_shader.ts";
import { lcgData } from "./_helpers.ts";

const REL = 1e-4, ABS = 1e-5; // elementwise / row-wise
const SUM_REL = 1e-5, SUM_ABS = 1e-6; // long sums, relative to Σ|terms|

const cpu = new CpuBackend();

/**
 * The backend under test, or null where this machine has no WebGPU adapter
 * or the run asks for the CPU alone (CONVEYOR_TEST_BACKENDS=cpu, as the
 * shared tensor suites honour). Then only the tests that need no adapter are
 * registered: createBackend's fallback and the shader preprocessor.
 */
async function openGpu(): Promise<WebGPUBackend | null> {
  if (Deno.env.get("CONVEYOR_TEST_BACKENDS") === "cpu") return null;
  try {
    // Tuning is exercised by its own test; the default variant keeps the
    // module quick.
    return await WebGPUBackend.create({ matmul: "default" });
  } catch (e) {
    console.error(`webgpu_backend_test: no WebGPU here (${(e as Error).message})`);
    return null;
  }
}
const maybeGpu = await openGpu();
const gpu = maybeGpu as WebGPUBackend;

/** Registers a test that needs the WebGPU backend. */
function gpuTest(name: string, fn: () => Promise<void> | void): void {
  if (maybeGpu !== null) Deno.test(name, fn);
}

let seed = 1;
function data(n: number, lo = -1, hi = 1): Float32Array {
  return lcgData(n, seed++, lo, hi);
}

function size(shape: Shape): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The same data on both backends. */
function pair(shape: Shape, d: Float32Array = data(size(shape))): [Tensor, Tensor] {
  return [cpu.fromData(d, shape), gpu.fromData(d, shape)];
}

function assertNear(
  got: Float32Array,
  want: Float32Array,
  what: string,
  scale?: ArrayLike<number>,
): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const tol = scale === undefined ? ABS + REL * Math.abs(want[i]) : SUM_ABS + SUM_REL * scale[i];
    if (!(Math.abs(got[i] - want[i]) <= tol)) {
      assert.fail(`${what}[${i}]: webgpu ${got[i]}, cpu ${want[i]}, tolerance ${tol}`);
    }
  }
}

function assertExact(got: Float32Array, want: Float32Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${what}[${i}]: webgpu ${got[i]}, cpu ${want[i]}`);
  }
}

async function both(c: Tensor, g: Tensor): Promise<[Float32Array, Float32Array]> {
  return [await g.toArray(), await c.toArray()];
}

/** Σ_k |a_ik · b_kj| for every output of a (batched) matmul, on the CPU. */
async function matmulScale(
  a: Tensor,
  b: Tensor,
  transA: boolean,
  transB: boolean,
): Promise<Float32Array> {
  const absA = cpu.fromData((await a.toArray()).map(Math.abs), a.shape);
  const absB = cpu.fromData((await b.toArray()).map(Math.abs), b.shape);
  return await ops.matmul(absA, absB, { transA, transB }).toArray();
}

// Shapes (M, K, N) that cross no tile boundary nicely, plus 1×N / N×1 ends.
const MATMUL_SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [1, 37, 1],
  [1, 5, 130],
  [130, 5, 1],
  [5, 7, 3],
  [33, 17, 65],
  [64, 64, 64],
  [67, 130, 29],
  [4, 9, 8],
];

async function checkMatmul(
  label: string,
  M: number,
  K: number,
  N: number,
  transA: boolean,
  transB: boolean,
  batch: number[] = [],
  sharedB = false,
): Promise<void> {
  const aShape = [...batch, ...(transA ? [K, M] : [M, K])];
  const bShape = [...(sharedB ? [] : batch), ...(transB ? [N, K] : [K, N])];
  const [ca, ga] = pair(aShape);
  const [cb, gb] = pair(bShape);
  const [got, want] = await both(
    ops.matmul(ca, cb, { transA, transB }),
    ops.matmul(ga, gb, { transA, transB }),
  );
  const what = `${label} matmul a[${aShape}] b[${bShape}] transA=${transA} transB=${transB}`;
  assertNear(got, want, what, await matmulScale(ca, cb, transA, transB));
}

const TRANSPOSES: [boolean, boolean][] = [[false, false], [true, false], [false, true], [
  true,
  true,
]];

gpuTest(
  "webgpu matmul: default variant, every transpose, awkward and 1×N / N×1 shapes",
  async () => {
    for (const [M, K, N] of MATMUL_SHAPES) {
      for (const [ta, tb] of TRANSPOSES) await checkMatmul("default", M, K, N, ta, tb);
    }
  },
);

gpuTest(
  "webgpu matmul: batches, a 2-D b shared by the batch, K = 0, and > 65535 batch entries",
  async () => {
    for (const [ta, tb] of TRANSPOSES) {
      await checkMatmul("batched", 7, 5, 6, ta, tb, [2, 3]);
      await checkMatmul("shared-b", 9, 6, 5, ta, tb, [4], true);
    }
    // K = 0 gives zeros.
    const z = ops.matmul(gpu.zeros([3, 0]), gpu.zeros([0, 4]));
    assertExact(await z.toArray(), new Float32Array(12), "K=0");
    // More batch entries than one dispatch dimension holds.
    await checkMatmul("huge-batch", 1, 4, 3, false, false, [70000], true);
  },
);

/** Checks NN, TN, NT (and TT when `all`) products of `be` on three shapes. */
async function checkVariant(be: WebGPUBackend, cfg: MatmulConfig, all: boolean): Promise<void> {
  be.setMatmulConfig(cfg);
  for (const [ta, tb] of all ? TRANSPOSES : TRANSPOSES.slice(0, 3)) {
    for (const [M, K, N] of [[1, 5, 3], [37, 19, 41], [70, 68, 66]]) {
      const aShape = ta ? [K, M] : [M, K], bShape = tb ? [N, K] : [K, N];
      const da = data(size(aShape)), db = data(size(bShape));
      const ca = cpu.fromData(da, aShape), cb = cpu.fromData(db, bShape);
      const opts = { transA: ta, transB: tb };
      const want = await ops.matmul(ca, cb, opts).toArray();
      const got = await ops.matmul(be.fromData(da, aShape), be.fromData(db, bShape), opts)
        .toArray();
      const what = `${JSON.stringify(cfg)} ${M}x${K}x${N} transA=${ta} transB=${tb}`;
      assertNear(got, want, what, await matmulScale(ca, cb, ta, tb));
    }
  }
}

gpuTest("webgpu matmul: shared-tile variants (the GPU family) equal the CPU", async () => {
  const be = await WebGPUBackend.create({ matmul: "default" });
  try {
    // Small tiles: cheap to compile on llvmpipe, same code as the GPU shapes.
    await checkVariant(be, { family: "tiled", tm: 4, tn: 4, wx: 4, wy: 4, bk: 4 }, true);
    await checkVariant(be, { family: "tiled", tm: 8, tn: 4, wx: 4, wy: 8, bk: 8 }, false);
    await checkVariant(
      be,
      { family: "tiled", tm: 4, tn: 4, wx: 4, wy: 4, bk: 4, transposes: "copy" },
      true,
    );
  } finally {
    await be.close();
  }
});

gpuTest(
  "webgpu matmul: autotune ranks the candidates, keeps the fastest and caches it",
  async () => {
    clearConfigCache();
    const be = await WebGPUBackend.create({ matmul: "auto" });
    try {
      const results = be.tuneResults;
      const names = candidateConfigs(be.cpuAdapter).map((c) => JSON.stringify(c)).sort();
      assert.deepEqual(results.map((r) => JSON.stringify(r.config)).sort(), names);
      for (let i = 1; i < results.length; i++) {
        assert.ok(results[i - 1].seconds <= results[i].seconds, "sorted fastest first");
      }
      assert.ok(Number.isFinite(results[0].seconds) && results[0].gflops > 0);
      assert.deepEqual(be.matmulConfig, results[0].config);
      // A second backend on the same adapter reuses the choice without timing.
      const again = await WebGPUBackend.create({ matmul: "auto" });
      try {
        assert.equal(again.tuneResults.length, 0);
        assert.deepEqual(again.matmulConfig, be.matmulConfig);
        // The tuned variant serves large matmuls: check one against the CPU.
        const M = 520, K = 36, N = 512;
        assert.ok(M * N >= LARGE_MATMUL_OUTPUTS);
        const da = data(M * K), db = data(K * N);
        const ca = cpu.fromData(da, [M, K]), cb = cpu.fromData(db, [K, N]);
        const got = await ops.matmul(again.fromData(da, [M, K]), again.fromData(db, [K, N]))
          .toArray();
        assertNear(
          got,
          await ops.matmul(ca, cb).toArray(),
          "tuned 520x36x512",
          await matmulScale(ca, cb, false, false),
        );
      } finally {
        await again.close();
      }
      // Every candidate equals the CPU (their plain variants are compiled
      // already; transposed ones only where the candidate has its own).
      // Training uses NN, NT and TN; TT runs where it costs no extra compile.
      for (const cfg of candidateConfigs(be.cpuAdapter)) {
        await checkVariant(be, cfg, cfg.transposes === "copy");
      }
    } finally {
      await be.close();
    }
  },
);

const ELEMENTWISE_SHAPES: Shape[] = [[1], [7], [1, 13], [13, 1], [3, 5, 7], [1000], [2, 65]];

gpuTest("webgpu elementwise: add, sub, mul, scale, axpy, fill, copy, addBias", async () => {
  for (const shape of ELEMENTWISE_SHAPES) {
    const [ca, ga] = pair(shape), [cb, gb] = pair(shape);
    for (const op of [ops.add, ops.sub, ops.mul]) {
      const [got, want] = await both(op(ca, cb), op(ga, gb));
      assertNear(got, want, `${op.name} [${shape}]`);
    }
    let [got, want] = await both(ops.scale(ca, -0.37), ops.scale(ga, -0.37));
    assertNear(got, want, `scale [${shape}]`);
    const [cy, gy] = pair(shape);
    ops.axpyInPlace(cy, 1.7, ca);
    ops.axpyInPlace(gy, 1.7, ga);
    [got, want] = await both(cy, gy);
    assertNear(got, want, `axpy [${shape}]`);
    ops.fillInPlace(cy, 2.5);
    ops.fillInPlace(gy, 2.5);
    [got, want] = await both(cy, gy);
    assertExact(got, want, `fill [${shape}]`);
    [got, want] = await both(ops.copy(ca), ops.copy(ga));
    assertExact(got, want, `copy [${shape}]`);
    const cols = shape[shape.length - 1];
    const [cbias, gbias] = pair([cols]);
    [got, want] = await both(ops.addBias(ca, cbias), ops.addBias(ga, gbias));
    assertNear(got, want, `addBias [${shape}]`);
  }
});

gpuTest("webgpu activations and their gradients, including large magnitudes", async () => {
  for (const shape of ELEMENTWISE_SHAPES) {
    const d = data(size(shape), -6, 6);
    if (d.length > 2) d[0] = 40, d[1] = -40;
    const [cx, gx] = pair(shape, d), [cdy, gdy] = pair(shape);
    let [got, want] = await both(ops.relu(cx), ops.relu(gx));
    assertExact(got, want, `relu [${shape}]`);
    [got, want] = await both(ops.gelu(cx), ops.gelu(gx));
    assertNear(got, want, `gelu [${shape}]`);
    [got, want] = await both(ops.tanh(cx), ops.tanh(gx));
    assertNear(got, want, `tanh [${shape}]`);
    [got, want] = await both(ops.reluBackward(cx, cdy), ops.reluBackward(gx, gdy));
    assertExact(got, want, `reluBackward [${shape}]`);
    [got, want] = await both(ops.geluBackward(cx, cdy), ops.geluBackward(gx, gdy));
    assertNear(got, want, `geluBackward [${shape}]`);
    const cy = ops.tanh(cx), gy = ops.tanh(gx);
    [got, want] = await both(ops.tanhBackward(cy, cdy), ops.tanhBackward(gy, gdy));
    assertNear(got, want, `tanhBackward [${shape}]`);
  }
});

const ROW_SHAPES: Shape[] = [[1, 1], [1, 9], [9, 1], [5, 7], [3, 4, 4], [2, 130], [70, 33]];

async function checkRowOps(be: WebGPUBackend, label: string): Promise<void> {
  for (const shape of ROW_SHAPES) {
    const cols = shape[shape.length - 1], rows = size(shape) / cols;
    const d = data(size(shape), -4, 4);
    const cx = cpu.fromData(d, shape), gx = be.fromData(d, shape);
    const dd = data(size(shape));
    const cdy = cpu.fromData(dd, shape), gdy = be.fromData(dd, shape);
    const what = `${label} [${shape}]`;

    let [got, want] = await both(ops.softmax(cx), ops.softmax(gx));
    assertNear(got, want, `softmax ${what}`);
    if (shape.length >= 2 && shape[shape.length - 2] === cols) {
      [got, want] = await both(
        ops.softmax(cx, { causal: true }),
        ops.softmax(gx, { causal: true }),
      );
      assertNear(got, want, `causal softmax ${what}`);
    }
    const cy = ops.softmax(cx), gy = ops.softmax(gx);
    [got, want] = await both(ops.softmaxBackward(cy, cdy), ops.softmaxBackward(gy, gdy));
    assertNear(got, want, `softmaxBackward ${what}`);

    const dg = data(cols), db = data(cols);
    const cg = cpu.fromData(dg, [cols]), gg = be.fromData(dg, [cols]);
    const cb = cpu.fromData(db, [cols]), gb = be.fromData(db, [cols]);
    const cl = ops.layerNorm(cx, cg, cb), gl = ops.layerNorm(gx, gg, gb);
    for (const k of ["y", "mean", "rstd"] as const) {
      [got, want] = await both(cl[k], gl[k]);
      assertNear(got, want, `layerNorm.${k} ${what}`);
    }
    [got, want] = await both(
      ops.layerNormBackwardInput(cdy, cx, cl, cg),
      ops.layerNormBackwardInput(gdy, gx, gl, gg),
    );
    assertNear(got, want, `layerNormBackwardInput ${what}`);
    const cw = ops.layerNormBackwardWeight(cdy, cx, cl);
    const gw = ops.layerNormBackwardWeight(gdy, gx, gl);
    const xh = await ops.layerNorm(
      cx,
      cpu.fromData(new Float32Array(cols).fill(1), [cols]),
      cpu.zeros([cols]),
    ).y.toArray();
    const scaleG = new Float32Array(cols), scaleB = new Float32Array(cols);
    for (let i = 0; i < dd.length; i++) {
      scaleG[i % cols] += Math.abs(dd[i] * xh[i]);
      scaleB[i % cols] += Math.abs(dd[i]);
    }
    [got, want] = await both(cw.dgamma, gw.dgamma);
    assertNear(got, want, `layerNormBackwardWeight.dgamma ${what}`, scaleG);
    [got, want] = await both(cw.dbeta, gw.dbeta);
    assertNear(got, want, `layerNormBackwardWeight.dbeta ${what}`, scaleB);

    const targets = new Float32Array(rows);
    for (let r = 0; r < rows; r++) targets[r] = (r * 7 + 3) % cols;
    const ct = cpu.fromData(targets, [rows]), gt = be.fromData(targets, [rows]);
    const c2 = cx.reshape([rows, cols]), g2 = gx.reshape([rows, cols]);
    const cce = ops.crossEntropy(c2, ct), gce = ops.crossEntropy(g2, gt);
    [got, want] = await both(cce.loss, gce.loss);
    assertNear(got, want, `crossEntropy.loss ${what}`);
    [got, want] = await both(cce.probs, gce.probs);
    assertNear(got, want, `crossEntropy.probs ${what}`);
    [got, want] = await both(
      ops.crossEntropyBackward(cce.probs, ct, 0.25),
      ops.crossEntropyBackward(gce.probs, gt, 0.25),
    );
    assertNear(got, want, `crossEntropyBackward ${what}`);
  }
}

gpuTest(
  "webgpu row-wise ops: softmax (+causal), layer norm fwd / bwd, cross-entropy fwd / bwd",
  async () => {
    await checkRowOps(gpu, "default");
  },
);

gpuTest(
  "webgpu row-wise ops with 32-invocation workgroups (the multi-lane reduction path)",
  async () => {
    const be = await WebGPUBackend.create({ matmul: "default", rowWorkgroupSize: 32 });
    try {
      await checkRowOps(be, "wg32");
    } finally {
      await be.close();
    }
  },
);

gpuTest("webgpu unary ops and gradients (exp, log, sigmoid, silu) equal the CPU", async () => {
  for (const shape of ELEMENTWISE_SHAPES) {
    const d = data(size(shape), -6, 6);
    if (d.length > 2) d[0] = 30, d[1] = -30;
    const [cx, gx] = pair(shape, d), [cdy, gdy] = pair(shape);
    const [cp, gp] = pair(shape, data(size(shape), 1e-3, 50));
    for (const op of [ops.exp, ops.sigmoid, ops.silu]) {
      const [got, want] = await both(op(cx), op(gx));
      assertNear(got, want, `${op.name} [${shape}]`);
    }
    let [got, want] = await both(ops.log(cp), ops.log(gp));
    assertNear(got, want, `log [${shape}]`);
    const cy = ops.sigmoid(cx), gy = ops.sigmoid(gx);
    [got, want] = await both(ops.sigmoidBackward(cy, cdy), ops.sigmoidBackward(gy, gdy));
    assertNear(got, want, `sigmoidBackward [${shape}]`);
    [got, want] = await both(ops.siluBackward(cx, cdy), ops.siluBackward(gx, gdy));
    assertNear(got, want, `siluBackward [${shape}]`);
  }
});

gpuTest(
  "webgpu broadcast binary ops, where and sumToShape equal the CPU (awkward shapes)",
  async () => {
    const cases: [Shape, Shape][] = [
      [[7, 13], [13]],
      [[7, 13], [7, 1]],
      [[3, 5, 7], [1, 5, 1]],
      [[1, 130], [65, 1]],
      [[2, 3, 4, 5, 6], [3, 1, 5, 1]],
      [[1000], [1]],
      [[70001, 3], [3]],
    ];
    for (const [aShape, bShape] of cases) {
      const [ca, ga] = pair(aShape), [cb, gb] = pair(bShape, data(size(bShape), 0.5, 2));
      for (const op of [ops.add, ops.sub, ops.mul, ops.div, ops.maximum]) {
        const [got, want] = await both(op(ca, cb), op(ga, gb));
        assertNear(got, want, `${op.name} [${aShape}] with [${bShape}]`);
        const [got2, want2] = await both(op(cb, ca), op(gb, ga));
        assertNear(got2, want2, `${op.name} [${bShape}] with [${aShape}]`);
      }
      const cond = data(size(bShape)).map((v) => (v > 0 ? 1 : 0));
      const [cc, gc] = pair(bShape, cond);
      let [got, want] = await both(ops.where(cc, ca, cb), ops.where(gc, ga, gb));
      assertExact(got, want, `where [${bShape}] [${aShape}] [${bShape}]`);
      // The gradient of the broadcast operand: long sums, tolerance on Σ|terms|.
      const y = ops.mul(ca, cb);
      const absSum = await ops.sumToShape(
        cpu.fromData((await y.toArray()).map(Math.abs), y.shape),
        bShape,
      ).toArray();
      [got, want] = await both(ops.sumToShape(y, bShape), ops.sumToShape(ops.mul(ga, gb), bShape));
      assertNear(got, want, `sumToShape [${aShape}] → [${bShape}]`, absSum);
    }
  },
);

gpuTest("webgpu log-sum-exp and RMS norm (forward, I and W) equal the CPU", async () => {
  for (const shape of ROW_SHAPES) {
    const cols = shape[shape.length - 1];
    const d = data(size(shape), -4, 4);
    if (d.length > 3) d[1] = 80; // past exp's f32 range without the max shift
    const [cx, gx] = pair(shape, d), [cdy, gdy] = pair(shape);
    let [got, want] = await both(ops.logSumExp(cx), ops.logSumExp(gx));
    assertNear(got, want, `logSumExp [${shape}]`);
    const [cw, gw] = pair([cols], data(cols, 0.5, 1.5));
    const cr = ops.rmsNorm(cx, cw), gr = ops.rmsNorm(gx, gw);
    [got, want] = await both(cr.y, gr.y);
    assertNear(got, want, `rmsNorm.y [${shape}]`);
    [got, want] = await both(cr.rstd, gr.rstd);
    assertNear(got, want, `rmsNorm.rstd [${shape}]`);
    [got, want] = await both(
      ops.rmsNormBackwardInput(cdy, cx, cr.rstd, cw),
      ops.rmsNormBackwardInput(gdy, gx, gr.rstd, gw),
    );
    assertNear(got, want, `rmsNormBackwardInput [${shape}]`);
    const scale = new Float32Array(cols);
    const dd = await cdy.toArray(), rs = await cr.rstd.toArray();
    for (let i = 0; i < d.length; i++) {
      scale[i % cols] += Math.abs(dd[i] * d[i] * rs[Math.floor(i / cols)]);
    }
    [got, want] = await both(
      ops.rmsNormBackwardWeight(cdy, cx, cr.rstd),
      ops.rmsNormBackwardWeight(gdy, gx, gr.rstd),
    );
    assertNear(got, want, `rmsNormBackwardWeight [${shape}]`, scale);
  }
});

gpuTest("webgpu dropout drops exactly the CPU's elements, bit for bit", async () => {
  for (const shape of [[1], [7], [3, 5, 7], [1000], [2, 65]] as Shape[]) {
    const [cx, gx] = pair(shape);
    for (const o of [{ p: 0.5, seed: 1 }, { p: 0.1, seed: 0xffffffff, step: 3, rowOffset: 5 }]) {
      const [got, want] = await both(ops.dropout(cx, o), ops.dropout(gx, o));
      assertExact(got, want, `dropout ${JSON.stringify(o)} [${shape}]`);
    }
  }
});

gpuTest("webgpu sums: sumRows, sum, sumSquares (long sums, tolerance on Σ|x|)", async () => {
  for (const shape of [[1], [1, 9], [9, 1], [5, 7], [3, 4, 5], [300, 3], [70001], [2, 40000]]) {
    const d = data(size(shape));
    const [cx, gx] = pair(shape, d);
    const cols = shape[shape.length - 1];
    const colAbs = new Float32Array(cols);
    let abs = 0, sq = 0;
    for (let i = 0; i < d.length; i++) {
      colAbs[i % cols] += Math.abs(d[i]);
      abs += Math.abs(d[i]);
      sq += d[i] * d[i];
    }
    let [got, want] = await both(ops.sumRows(cx), ops.sumRows(gx));
    assertNear(got, want, `sumRows [${shape}]`, colAbs);
    [got, want] = await both(ops.sum(cx), ops.sum(gx));
    assertNear(got, want, `sum [${shape}]`, [abs]);
    [got, want] = await both(ops.sumSquares(cx), ops.sumSquares(gx));
    assertNear(got, want, `sumSquares [${shape}]`, [sq]);
  }
});

gpuTest(
  "webgpu embedding gather and scatter-add equal the CPU exactly (repeated ids)",
  async () => {
    for (
      const [V, C, ids] of [[5, 3, [3]], [7, 4, [0, 6, 6, 2, 0]], [1, 9, [0, 0]], [11, 1, [
        10,
        1,
        10,
      ]]] as [number, number, number[]][]
    ) {
      const [ct, gt] = pair([V, C]);
      const idShape = ids.length > 2 ? [1, ids.length] : [ids.length];
      const [ci, gi] = pair(idShape, Float32Array.from(ids));
      let [got, want] = await both(ops.embedding(ct, ci), ops.embedding(gt, gi));
      assertExact(got, want, `embedding V=${V} C=${C}`);
      const [cdy, gdy] = pair([...idShape, C]);
      ops.embeddingBackwardInPlace(ct, ci, cdy);
      ops.embeddingBackwardInPlace(gt, gi, gdy);
      [got, want] = await both(ct, gt);
      assertExact(got, want, `embeddingBackward V=${V} C=${C}`);
    }
  },
);

gpuTest(
  "webgpu embedding and cross-entropy: out-of-range integers are the CPU's RangeError",
  () => {
    const table = gpu.fromData(data(8), [4, 2]);
    const ids = gpu.fromData(Float32Array.from([1, 4, -1, 0.5]), [4]);
    assert.throws(
      () => ops.embedding(table, ids),
      (e) =>
        e instanceof RangeError &&
        /embedding: id at position 1 must be an integer in \[0, 4\), got 4/.test(e.message),
    );
    const logits = gpu.fromData(data(6), [2, 3]);
    assert.throws(
      () => ops.crossEntropy(logits, gpu.fromData(Float32Array.from([2, 3]), [2])),
      (e) =>
        e instanceof RangeError &&
        /crossEntropy: target at position 1 .* \[0, 3\), got 3/.test(e.message),
    );
  },
);

gpuTest(
  "webgpu embedding backward, sorted (both sorts) and scanning: bit for bit the CPU's sums (position order)",
  async () => {
    for (const [variant, local] of [["sort", false], ["sort", true], ["scan", false]] as const) {
      const be = await WebGPUBackend.create({
        matmul: "default",
        embeddingBackward: variant,
        sortInWorkgroupMemory: local,
      });
      try {
        const cases: [number, number, number][] = [[7, 4, 5], [3, 5, 513], [50, 8, 1500], [
          1000,
          3,
          700,
        ]];
        if (variant === "sort") cases.push([300, 4, 20000], [2, 1, 4097]);
        for (const [V, C, N] of cases) {
          // Heavy repeats: a few ids take most positions.
          const idData = Float32Array.from(
            { length: N },
            (_, i) => (i % 3 === 0 ? 1 % V : (i * 7919) % V),
          );
          const dTable = data(V * C), dyData = data(N * C);
          const ct = cpu.fromData(dTable, [V, C]), gt = be.fromData(dTable, [V, C]);
          ops.embeddingBackwardInPlace(ct, cpu.fromData(idData, [N]), cpu.fromData(dyData, [N, C]));
          ops.embeddingBackwardInPlace(gt, be.fromData(idData, [N]), be.fromData(dyData, [N, C]));
          assertExact(
            await gt.toArray(),
            await ct.toArray(),
            `${variant} local=${local} V=${V} C=${C} N=${N}`,
          );
        }
        // Ids computed on the device (no host check) that are out of range add nothing.
        const ids = ops.scale(be.fromData(Float32Array.of(0, 1, 2, 9), [4]), 1);
        const t = be.zeros([3, 2]);
        ops.embeddingBackwardInPlace(t, ids, be.fromData(new Float32Array(8).fill(1), [4, 2]));
        await assert.rejects(() => t.toArray(), RangeError);
        assertExact(
          await t.toArray(),
          Float32Array.of(1, 1, 1, 1, 1, 1),
          `${variant} bad id skipped`,
        );
      } finally {
        await be.close();
      }
    }
  },
);

gpuTest("webgpu adamw: three steps equal the CPU", async () => {
  for (const shape of [[1], [7], [3, 5]]) {
    const [cp, gp] = pair(shape),
      [cm, gm] = pair(shape),
      [cv, gv] = pair(shape, data(size(shape), 0, 1));
    for (let step = 1; step <= 3; step++) {
      const hp = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, step };
      const [cg, gg] = pair(shape);
      ops.adamwInPlace(cp, cg, cm, cv, hp);
      ops.adamwInPlace(gp, gg, gm, gv, hp);
    }
    for (const [c, g, k] of [[cp, gp, "param"], [cm, gm, "m"], [cv, gv, "v"]] as const) {
      const [got, want] = await both(c, g);
      assertNear(got, want, `adamw ${k} [${shape}]`);
    }
  }
});

gpuTest("webgpu sgd: three steps equal the CPU, with and without momentum", async () => {
  for (const shape of [[1], [7], [3, 5], [1030]]) {
    for (const [momentum, weightDecay] of [[0.9, 0.1], [0, 0.1], [0.5, 0], [0, 0]]) {
      const [cp, gp] = pair(shape);
      const [cb, gb] = momentum === 0 ? [null, null] : [cpu.zeros(shape), gpu.zeros(shape)];
      for (let step = 1; step <= 3; step++) {
        const hp = { lr: 0.05, momentum, weightDecay };
        const [cg, gg] = pair(shape);
        ops.sgdInPlace(cp, cg, cb, hp);
        ops.sgdInPlace(gp, gg, gb, hp);
      }
      const what = `sgd momentum ${momentum} weightDecay ${weightDecay} [${shape}]`;
      let [got, want] = await both(cp, gp);
      assertNear(got, want, `${what} param`);
      if (cb !== null) {
        [got, want] = await both(cb, gb!);
        assertNear(got, want, `${what} buf`);
      }
    }
  }
});

gpuTest("webgpu copyInPlace equals the CPU exactly; scaleInPlace within tolerance", async () => {
  for (const shape of [[1], [5], [3, 7], [1030]]) {
    const [cd, gd] = pair(shape), [cs, gs] = pair(shape);
    ops.copyInPlace(cd, cs);
    ops.copyInPlace(gd, gs);
    let [got, want] = await both(cd, gd);
    assertExact(got, want, `copyInPlace [${shape}]`);
    ops.scaleInPlace(cd, -0.37);
    ops.scaleInPlace(gd, -0.37);
    [got, want] = await both(cd, gd);
    assertNear(got, want, `scaleInPlace [${shape}]`);
    // The source is untouched by both.
    [got, want] = await both(cs, gs);
    assertExact(got, want, `copyInPlace source [${shape}]`);
  }
});

gpuTest("webgpu copies: sliceRows, concatRows and permute equal the CPU exactly", async () => {
  const [cx, gx] = pair([7, 3, 2]);
  let [got, want] = await both(ops.sliceRows(cx, 2, 5), ops.sliceRows(gx, 2, 5));
  assertExact(got, want, "sliceRows");
  [got, want] = await both(ops.sliceRows(cx, 3, 3), ops.sliceRows(gx, 3, 3));
  assertExact(got, want, "empty slice");
  const [cy, gy] = pair([1, 3, 2]);
  [got, want] = await both(ops.concatRows([cx, cy, cx]), ops.concatRows([gx, gy, gx]));
  assertExact(got, want, "concatRows");
  const perms: [Shape, number[]][] = [
    [[2, 3], [1, 0]],
    [[1, 5], [1, 0]],
    [[2, 3, 4], [2, 0, 1]],
    [[2, 1, 3, 4], [0, 2, 1, 3]],
    [[3, 2, 4, 5], [0, 2, 1, 3]],
    [[2, 3, 2, 3, 2], [4, 3, 2, 1, 0]],
    [[2, 3, 2, 3, 2, 3], [5, 3, 1, 4, 2, 0]],
  ];
  for (const [shape, perm] of perms) {
    const [c, g] = pair(shape);
    [got, want] = await both(ops.permute(c, perm), ops.permute(g, perm));
    assertExact(got, want, `permute [${shape}] by [${perm}]`);
  }
});

gpuTest("webgpu 2-D dispatch: more than 65535 workgroups of elements and of rows", async () => {
  // One element per invocation, 256 per workgroup: 65537 workgroups, past
  // what one grid dimension holds (vec4 kernels would need more floats than
  // one binding may hold on this adapter; they share the same grid code).
  const rows = 65536 * 64 + 1, cols = 4;
  const d = new Float32Array(rows * cols);
  for (let i = 0; i < d.length; i++) d[i] = i % 1013;
  const t = await ops.permute(gpu.fromData(d, [rows, cols]), [1, 0]).toArray();
  assert.equal(t.length, d.length);
  for (let o = 0; o < t.length; o += 7919) {
    const c = Math.floor(o / rows), r = o % rows;
    assert.equal(t[o], d[r * cols + c], `permute[${o}]`);
  }
  assert.equal(t[t.length - 1], d[d.length - 1]);
  // Rows past 65535 run on a 2-D grid of row workgroups.
  const [cx, gx] = pair([70003, 3]);
  const [g2, w2] = await both(ops.softmax(cx), ops.softmax(gx));
  assertNear(g2, w2, "softmax 70003 rows");
});

gpuTest("webgpu: many dispatches before one read, and concurrent reads", async () => {
  const n = 37;
  const one = gpu.fromData(new Float32Array(n).fill(1), [n]);
  let acc = gpu.zeros([n]);
  // Well past one batch (256 dispatches): auto-submits must keep the order.
  for (let i = 0; i < 700; i++) {
    const next = ops.add(acc, one);
    acc.dispose();
    acc = next;
  }
  assertExact(await acc.toArray(), new Float32Array(n).fill(700), "700 chained adds");
  const xs = Array.from({ length: 8 }, (_, i) => ops.scale(one, i));
  const reads = await Promise.all(xs.map((x) => x.toArray()));
  reads.forEach((r, i) => assertExact(r, new Float32Array(n).fill(i), `read ${i}`));
});

gpuTest("webgpu memory: accounting matches the CPU, the pool reuses released buffers", async () => {
  const be = await WebGPUBackend.create({ matmul: "default" });
  try {
    const base = be.memory.liveBytes;
    const t = be.zeros([10, 10]);
    const v = t.reshape([100]);
    assert.equal(be.memory.liveBytes - base, 400);
    t.dispose();
    assert.equal(be.memory.liveBytes - base, 400, "a view keeps the storage");
    v.dispose();
    assert.equal(be.memory.liveBytes, base);
    be.memory.resetPeak();
    // A loop of allocate / compute / release reuses the same buffers.
    const x = be.fromData(data(1000), [1000]);
    await be.sync();
    const created = be.pool.created;
    for (let i = 0; i < 20; i++) {
      const y = ops.scale(x, 2);
      const z = ops.add(y, x);
      y.dispose();
      z.dispose();
      await be.sync();
    }
    assert.ok(be.pool.created - created <= 2, `created ${be.pool.created - created} buffers`);
    assert.ok(be.pool.reused >= 38, `reused ${be.pool.reused}`);
    assert.equal(be.memory.liveBytes, base + 4000);
    assert.equal(be.memory.peakBytes, base + 4000 + 8000);
    x.dispose();
    assert.equal(be.memory.liveBytes, base);
    // Released before submit, reused as a kernel output within one batch.
    const p = be.fromData(data(64), [64]);
    const q = ops.scale(p, 3);
    const want = (await q.toArray()).slice();
    const r = ops.scale(q, 1);
    q.dispose();
    const s = ops.scale(p, 5); // may take q's buffer: r must still see q's values
    assertExact(await r.toArray(), want, "value read before the buffer was reused");
    assertExact(await s.toArray(), (await p.toArray()).map((e) => e * 5), "new value");
  } finally {
    await be.close();
  }
});

gpuTest("webgpu: use after dispose and after close throw TypeError", async () => {
  const be = await WebGPUBackend.create({ matmul: "default" });
  const t = be.fromData(data(4), [4]);
  t.dispose();
  assert.throws(() => t.toArray(), TypeError);
  assert.throws(() => ops.relu(t), TypeError);
  const u = be.fromData(data(4), [4]);
  const v = ops.scale(u, 2); // queued work that close() waits for
  assert.equal(be.closed, false);
  const closing = be.close();
  // Refused at once, before the device is released.
  assert.equal(be.closed, true);
  assert.throws(() => be.zeros([2]), (e) => e instanceof TypeError && /close\(\)/.test(e.message));
  await closing;
  assert.equal(be.close(), closing, "idempotent: the same promise");
  const lost = await be.device.lost;
  assert.equal(lost.reason, "destroyed", "the device was released");
  assert.throws(() => be.zeros([2]), (e) => e instanceof TypeError && /close\(\)/.test(e.message));
  await assert.rejects(() => u.toArray(), TypeError);
  await assert.rejects(() => be.sync(), TypeError);
  assert.throws(
    () => ops.relu(u),
    (e) => e instanceof TypeError && /relu: x is on webgpu#\d+, which was closed/.test(e.message),
  );
  u.dispose(); // releasing after close is harmless
  v.dispose();
  assert.equal(be.memory.liveBytes, 0);
});

gpuTest(
  "webgpu: close() releases the device even when the queued work failed, then throws",
  async () => {
    const be = await WebGPUBackend.create({ matmul: "default" });
    const table = be.fromData(data(8), [4, 2]);
    const host = be.fromData(Float32Array.of(0, 9), [2]);
    const ids = ops.scale(host, 1); // computed on the device: checked there
    const e = ops.embedding(table, ids); // the bad id is found by the device
    await assert.rejects(() => be.close(), /id at position 1 must be an integer in \[0, 4\)/);
    assert.equal((await be.device.lost).reason, "destroyed");
    for (const t of [table, host, ids, e]) t.dispose();
    assert.equal(be.memory.liveBytes, 0);
  },
);

gpuTest(
  "createBackend: webgpu gives WebGPU where an adapter exists (a software one too)",
  async () => {
    const g = await createBackend("webgpu", { matmul: "default" });
    assert.equal(g.name, "webgpu");
    await g.close();
  },
);

Deno.test("createBackend: cpu, bad kinds, and the CPU fallback without an adapter", async () => {
  assert.equal((await createBackend("cpu")).name, "cpu");
  await assert.rejects(
    () => createBackend("tpu" as "cpu"),
    (e) => e instanceof RangeError && /"tpu"/.test(e.message),
  );
  const desc = Object.getOwnPropertyDescriptor(Navigator.prototype, "gpu")!;
  const lines: string[] = [];
  const origError = console.error;
  console.error = (...args: unknown[]) => void lines.push(args.join(" "));
  try {
    for (const fake of [undefined, { requestAdapter: () => Promise.resolve(null) }]) {
      Object.defineProperty(Navigator.prototype, "gpu", { configurable: true, get: () => fake });
      lines.length = 0;
      const be: Backend = await createBackend();
      assert.equal(be.name, "cpu");
      // The notice of "auto" is said once per process (create_backend_test.ts).
      assert.ok(lines.length <= 1, "at most one notice line");
      await assert.rejects(
        () => createBackend("webgpu"),
        (e) => e instanceof Error && /no adapter/.test(e.message),
      );
    }
  } finally {
    Object.defineProperty(Navigator.prototype, "gpu", desc);
    console.error = origError;
  }
});

Deno.test("kernel specialisation: constants, //#if blocks and //#unroll loops", () => {
  const src = [
    "const N: u32 = 2u;",
    "const F: bool = false;",
    "const M: u32 = N * 2u;",
    "//#if F",
    "yes",
    "//#else",
    "no",
    "//#endif",
    "//#unroll",
    "for (var i = 0u; i < M; i++) {",
    "  body(i);",
    "}",
    "//#endunroll",
  ].join("\n");
  const out = specialize(src, { N: 3, F: false });
  assert.match(out, /const N: u32 = 3u;/);
  assert.ok(out.includes("no") && !out.includes("yes"));
  assert.equal(out.match(/body\(i\);/g)?.length, 6);
  assert.ok(out.includes("let i = 5u;") && !out.includes("for ("));
  assert.throws(() => specialize(src, { Q: 1 }), RangeError);
  assert.deepEqual(defaultConfig(true).family, "direct");
});
