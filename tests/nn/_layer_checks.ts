/**
 * Checks every layer test runs: B and W against central finite differences
 * (CPU), B/W split versus fused backward (bitwise, CPU), and every other
 * backend against the CPU on the same weights and inputs.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import type { Layer } from "../../src/nn/layer.ts";
import { lcgData } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { tensorStorage } from "../../src/tensor/tensor.ts";

/** Builds the layer under test on a backend (same seed → same weights). */
export type LayerFactory = (be: Backend) => Layer;
/** Builds an input for the layer (`seed` varies it, e.g. per micro-batch). */
export type InputFactory = (be: Backend, seed: number) => Tensor;

/** Tolerances of the finite-difference check: pass when |a − n| ≤ atol + rtol·max(|a|, |n|). */
export interface GradCheckTolerance {
  /** Step of the central difference. */
  readonly eps: number;
  /** Relative tolerance. */
  readonly rtol: number;
  /** Absolute tolerance. */
  readonly atol: number;
}

/** Default for smooth layers in f32: eps 1e-2, rtol 2e-2, atol 2e-3 (truncation error O(eps²)). */
export const DEFAULT_TOL: GradCheckTolerance = { eps: 1e-2, rtol: 2e-2, atol: 2e-3 };

function cpuData(t: Tensor): Float32Array {
  return tensorStorage(t) as Float32Array;
}

/** Σ y·r in f64: the scalar whose gradient the check compares. */
function dot(y: Float32Array, r: Float32Array): number {
  let s = 0;
  for (let i = 0; i < y.length; i++) s += y[i] * r[i];
  return s;
}

function compare(
  what: string,
  analytic: ArrayLike<number>,
  numeric: number,
  i: number,
  tol: GradCheckTolerance,
): number {
  const a = analytic[i];
  const err = Math.abs(a - numeric);
  const bound = tol.atol + tol.rtol * Math.max(Math.abs(a), Math.abs(numeric));
  if (!(err <= bound)) {
    assert.fail(
      `${what}[${i}]: analytic ${a}, finite difference ${numeric} (|diff| ${err} > ${bound})`,
    );
  }
  return err;
}

/** Indices to probe: all when few, else an even spread plus the ends. */
function probes(n: number, max: number): number[] {
  if (n <= max) return Array.from({ length: n }, (_, i) => i);
  const out = new Set<number>([0, n - 1]);
  for (let k = 0; out.size < max; k++) out.add(Math.floor((k * 7919 + 13) % n));
  return [...out].sort((a, b) => a - b);
}

/**
 * Compares B's `dx` (when `checkInput`) and W's parameter gradients with
 * central differences of L = Σ y·r, r fixed random. Returns the largest
 * absolute error seen.
 */
export async function gradCheck(
  make: LayerFactory,
  input: InputFactory,
  opts: {
    tol?: GradCheckTolerance;
    checkInput?: boolean;
    maxProbes?: number;
    /** Called once after construction, e.g. to randomise γ of a norm. */
    prepare?: (layer: Layer) => void;
  } = {},
): Promise<number> {
  const tol = opts.tol ?? DEFAULT_TOL;
  const maxProbes = opts.maxProbes ?? 24;
  const be = new CpuBackend();
  const layer = make(be);
  opts.prepare?.(layer);
  const x = input(be, 1);
  const y = layer.forward(x, { key: "fd" });
  const r = lcgData(y.size, 99);
  const dy = be.fromData(r, y.shape);
  layer.zeroGrad();
  const dx = layer.backwardInput(dy, "fd");
  layer.backwardWeight("fd");
  assert.deepEqual(layer.heldKeys(), [], "W must free the state");
  let worst = 0;
  const loss = (xt: Tensor): number => {
    const yy = layer.forward(xt, { save: false });
    const v = dot(cpuData(yy), r);
    yy.dispose();
    return v;
  };

  if (opts.checkInput ?? true) {
    const dxa = await dx.toArray();
    const xd = cpuData(x);
    for (const i of probes(x.size, maxProbes)) {
      const p = new Float32Array(xd);
      p[i] = xd[i] + tol.eps;
      const xp = be.fromData(p, x.shape);
      p[i] = xd[i] - tol.eps;
      const xm = be.fromData(p, x.shape);
      const num = (loss(xp) - loss(xm)) / (2 * tol.eps);
      xp.dispose();
      xm.dispose();
      worst = Math.max(worst, compare(`${layer.kind} dx`, dxa, num, i, tol));
    }
  }
  for (const p of layer.parameters()) {
    const w = cpuData(p.value);
    const g = await p.grad.toArray();
    for (const i of probes(w.length, maxProbes)) {
      const orig = w[i];
      w[i] = orig + tol.eps;
      const lp = loss(x);
      w[i] = orig - tol.eps;
      const lm = loss(x);
      w[i] = orig;
      worst = Math.max(
        worst,
        compare(`${layer.kind} d${p.name}`, g, (lp - lm) / (2 * tol.eps), i, tol),
      );
    }
  }
  for (const t of [x, y, dy, dx]) t.dispose();
  layer.dispose();
  return worst;
}

async function grads(layer: Layer): Promise<Float32Array[]> {
  return await Promise.all(layer.parameters().map((p) => p.grad.toArray()));
}

/**
 * Two micro-batches: (F0 F1 B0 B1 W0 W1) on one copy of the layer versus
 * (F0 B0+W0 F1 B1+W1) with the fused `backward` on another: identical dx
 * and gradients, bit for bit (CPU), and no state left behind.
 */
export async function checkSplitEqualsFused(
  make: LayerFactory,
  input: InputFactory,
): Promise<void> {
  const be = new CpuBackend();
  const split = make(be), fused = make(be);
  const x0 = input(be, 1), x1 = input(be, 2);
  const outShape = split.outputShape(x0.shape);
  const n = outShape.reduce((a, b) => a * b, 1);
  const dy0 = be.fromData(lcgData(n, 5), outShape), dy1 = be.fromData(lcgData(n, 6), outShape);

  const ys0 = split.forward(x0, { key: "mb0" });
  const ys1 = split.forward(x1, { key: "mb1" });
  assert.deepEqual(new Set(split.heldKeys()), new Set(["mb0", "mb1"]));
  const dxs0 = split.backwardInput(dy0, "mb0");
  const dxs1 = split.backwardInput(dy1, "mb1");
  // B must not have touched the gradients: W does that.
  for (const g of await grads(split)) assert.ok(g.every((v) => v === 0), "B changed a gradient");
  split.backwardWeight("mb0");
  split.backwardWeight("mb1");
  assert.deepEqual(split.heldKeys(), []);

  const yf0 = fused.forward(x0, { key: "mb0" });
  const dxf0 = fused.backward(dy0, "mb0");
  const yf1 = fused.forward(x1, { key: "mb1" });
  const dxf1 = fused.backward(dy1, "mb1");
  assert.deepEqual(fused.heldKeys(), []);

  assert.deepEqual(await ys0.toArray(), await yf0.toArray(), "y0");
  assert.deepEqual(await ys1.toArray(), await yf1.toArray(), "y1");
  assert.deepEqual(await dxs0.toArray(), await dxf0.toArray(), "dx0");
  assert.deepEqual(await dxs1.toArray(), await dxf1.toArray(), "dx1");
  const gs = await grads(split), gf = await grads(fused);
  const names = split.parameters().map((p) => p.name);
  gs.forEach((g, i) => assert.deepEqual(g, gf[i], `grad ${names[i]}`));
  for (const t of [x0, x1, dy0, dy1, ys0, ys1, dxs0, dxs1, yf0, yf1, dxf0, dxf1]) t.dispose();
  split.dispose();
  fused.dispose();
}

/** Asserts `|a − e| ≤ tol·(1 + |e|)` elementwise. */
export function assertNear(
  a: ArrayLike<number>,
  e: ArrayLike<number>,
  tol: number,
  what: string,
): void {
  assert.equal(a.length, e.length, `${what}: length`);
  for (let i = 0; i < e.length; i++) {
    if (!(Math.abs(a[i] - e[i]) <= tol * (1 + Math.abs(e[i])))) {
      assert.fail(`${what}[${i}]: got ${a[i]}, CPU ${e[i]} (tol ${tol})`);
    }
  }
}

/**
 * Runs forward, B and W on `other` and on a CPU backend with the same
 * weights and inputs, and compares y, dx and every gradient within `tol`.
 */
export async function checkAgainstCpu(
  other: Backend,
  make: LayerFactory,
  input: InputFactory,
  tol: number,
): Promise<void> {
  const run = async (be: Backend) => {
    const layer = make(be);
    const x = input(be, 1);
    const y = layer.forward(x, { key: 0 });
    const dy = be.fromData(lcgData(y.size, 7), y.shape);
    const dx = layer.backwardInput(dy, 0);
    layer.backwardWeight(0);
    const out = {
      y: await y.toArray(),
      dx: await dx.toArray(),
      grads: await grads(layer),
      names: layer.parameters().map((p) => p.name),
    };
    for (const t of [x, y, dy, dx]) t.dispose();
    layer.dispose();
    return out;
  };
  const ref = await run(new CpuBackend({ exact: true }));
  const got = await run(other);
  assertNear(got.y, ref.y, tol, `${other.name} y`);
  assertNear(got.dx, ref.dx, tol, `${other.name} dx`);
  ref.grads.forEach((g, i) =>
    assertNear(got.grads[i], g, tol, `${other.name} grad ${ref.names[i]}`)
  );
}

/** Uniform values in [lo, hi) as a tensor. */
export function uniform(be: Backend, shape: number[], seed: number, lo = -1, hi = 1): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return be.fromData(lcgData(n, seed, lo, hi), shape);
}

/** Integer ids in [0, vocab) as an f32 tensor. */
export function ids(be: Backend, shape: number[], vocab: number, seed: number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const raw = lcgData(n, seed, 0, vocab - 0.01); // stays below vocab after f32 rounding
  return be.fromData(raw.map(Math.floor), shape);
}

/**
 * Registers the tests every parameter-free elementwise activation layer
 * (ReLU, GELU, Tanh) gets: finite differences, B/W split versus fused, every
 * backend against the CPU, and the no-parameters / shape / state contract.
 */
export async function registerActivationTests(
  name: string,
  make: LayerFactory,
  input: InputFactory,
): Promise<void> {
  const backends = await testBackends();

  Deno.test(`${name}: B matches central finite differences (eps 1e-2, rtol 2e-2, atol 2e-3)`, async () => {
    const worst = await gradCheck(make, input, { maxProbes: 12 });
    assert.ok(worst < 2e-3, `worst error ${worst}`);
  });

  Deno.test(`${name}: B then W equals the fused backward bitwise over interleaved micro-batches`, async () => {
    await checkSplitEqualsFused(make, input);
  });

  for (const be of backends) {
    Deno.test(`${name}: ${label(be)} matches the CPU reference (tol 1e-5)`, async () => {
      await checkAgainstCpu(be, make, input, 1e-5);
    });
  }

  Deno.test(`${name}: no parameters, shape kept, state freed by W`, () => {
    const be = new CpuBackend();
    const l = make(be);
    assert.deepEqual(l.parameters(), []);
    assert.deepEqual(l.outputShape([2, 3, 4]), [2, 3, 4]);
    assert.equal(l.cost([2, 3]).params, 0);
    const x = be.zeros([2, 3]);
    const y = l.forward(x, { key: "a" });
    assert.deepEqual(l.heldKeys(), ["a"]);
    const dx = l.backward(y, "a");
    assert.deepEqual(l.heldKeys(), []);
    for (const t of [x, y, dx]) t.dispose();
    assert.equal(be.memory.liveBytes, 0, "every tensor released");
  });
}
