/**
 * Assertions shared by the tensor tests.
 *
 * @module
 */

import assert from "node:assert/strict";

/** Asserts `|a - e| <= tol * (1 + |e|)` element by element, naming the first miss. */
export function assertClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: number,
  what = "values",
): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i], e = expected[i];
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
