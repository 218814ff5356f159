/**
 * Assertions shared by the tensor tests.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend, Shape } from "../../src/tensor/backend.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";

/**
 * Asserts `|a - e| <= tol * (1 + |e|)` element by element, naming the first
 * miss; a non-finite expected value (±Infinity, NaN) must be met exactly.
 */
export function assertClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: number,
  what = "values",
): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i], e = expected[i];
    if (!Number.isFinite(e)) {
      if (!(a === e || (Number.isNaN(a) && Number.isNaN(e)))) {
        assert.fail(`${what}[${i}]: got ${a}, expected ${e}`);
      }
      continue;
    }
    if (!(Math.abs(a - e) <= tol * (1 + Math.abs(e)))) {
      assert.fail(`${what}[${i}]: got ${a}, expected ${e} (tol ${tol})`);
    }
  }
}

/**
 * Asserts that `fn` throws an instance of `cls` whose message contains every
 * string in `parts` (the shapes or values the error must name).
 */
export function assertThrowsWith(
  fn: () => unknown,
  cls: ErrorConstructor | TypeErrorConstructor | RangeErrorConstructor,
  parts: readonly string[],
): Error {
  let caught: unknown = undefined;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  if (caught === undefined) assert.fail(`expected ${cls.name}, nothing was thrown`);
  const err = caught as Error;
  assert.ok(
    err instanceof cls && err.constructor === cls,
    `expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`,
  );
  for (const p of parts) {
    assert.ok(err.message.includes(p), `message "${err.message}" should mention "${p}"`);
  }
  return err;
}

/** Deterministic uniform values in [lo, hi) from a tiny LCG (independent of Rng). */
export function lcgData(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = lo + (hi - lo) * (s / 0x100000000);
  }
  return out;
}

/**
 * Central finite differences of L(x) = Σ dy · f(x) on the backend of the
 * result, one input element at a time (step h): the numeric gradient that
 * analytic gradients are compared with. `f` must not keep its input.
 */
export async function fdGrad(
  be: Backend,
  f: (x: Tensor) => Tensor,
  x0: Float32Array,
  shape: Shape,
  dy: ArrayLike<number>,
  h = 1e-2,
): Promise<Float64Array> {
  const g = new Float64Array(x0.length);
  for (let i = 0; i < x0.length; i++) {
    const xp = Float32Array.from(x0), xm = Float32Array.from(x0);
    xp[i] += h;
    xm[i] -= h;
    const loss = async (x: Float32Array): Promise<number> => {
      const xt = be.fromData(x, shape);
      const y = f(xt);
      xt.dispose();
      const yd = await y.toArray();
      y.dispose();
      let l = 0;
      for (let j = 0; j < yd.length; j++) l += dy[j] * yd[j];
      return l;
    };
    g[i] = (await loss(xp) - await loss(xm)) / (xp[i] - xm[i]);
  }
  return g;
}

/** Reads a tensor and disposes it. */
export async function take(t: Tensor): Promise<Float32Array> {
  const d = await t.toArray();
  t.dispose();
  return d;
}
