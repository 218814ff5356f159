/**
 * Scoped disposal of temporaries: `tidy(fn)` disposes every tensor handle
 * created while `fn` runs except those it returns (tfjs style), and
 * `keep(t)` exempts a long-lived tensor created inside. Tensors also
 * implement `Symbol.dispose`, so `using t = …` releases one at the end of
 * its block.
 *
 * @module
 */

import { type Disposable, scopes } from "./_scope.ts";
import { Tensor } from "./tensor.ts";

/** Adds every tensor reachable from `v` (arrays, plain objects, Maps, Sets) to `out`. */
function collect(v: unknown, out: Set<unknown>, depth: number): void {
  if (v instanceof Tensor) {
    out.add(v);
    return;
  }
  if (depth > 8 || v === null || typeof v !== "object") return;
  if (Array.isArray(v)) {
    for (const x of v) collect(x, out, depth + 1);
  } else if (v instanceof Map || v instanceof Set) {
    for (const x of v.values()) collect(x, out, depth + 1);
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto === Object.prototype || proto === null) {
      for (const x of Object.values(v)) collect(x, out, depth + 1);
    }
  }
}

function isThenable(v: unknown): boolean {
  return v !== null && (typeof v === "object" || typeof v === "function") &&
    typeof (v as { then?: unknown }).then === "function";
}

/**
 * Runs `fn` and disposes every tensor handle created during the call that
 * is neither part of its result (a tensor, or tensors in arrays, plain
 * objects, Maps or Sets) nor passed to {@linkcode keep}; returns the
 * result. If `fn` throws, everything it created is disposed and the error
 * rethrown. Scopes nest: what an inner `tidy` returns belongs to the outer
 * one. `fn` must be synchronous (a returned Promise is a TypeError: tensors
 * created after an `await` could not be tracked). Layers, optimizers and
 * other long-lived state built on the library keep what they store, so a
 * training step can run inside `tidy`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops, tidy } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3]), [3]);
 * const y = tidy(() => {
 *   const t = ops.mul(x, x); // a temporary: disposed when tidy returns
 *   return ops.add(t, x); // returned: kept
 * });
 * assert.deepEqual([...await y.toArray()], [2, 6, 12]);
 * assert.equal(be.memory.liveBytes, 24); // x and y only
 * ```
 */
export function tidy<T>(fn: () => T): T {
  if (typeof fn !== "function") {
    throw new TypeError(`tidy: fn must be a function, got ${fn === null ? "null" : typeof fn}`);
  }
  const scope = new Set<Disposable>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    scopes.splice(scopes.indexOf(scope), 1);
    for (const t of scope) t.dispose();
    throw e;
  }
  scopes.splice(scopes.indexOf(scope), 1);
  if (isThenable(result)) {
    throw new TypeError(
      "tidy: fn must be synchronous, got a Promise (tensors created after an await cannot be tracked); " +
        "await outside tidy, or dispose with `using`",
    );
  }
  const out = new Set<unknown>();
  collect(result, out, 0);
  const parent = scopes[scopes.length - 1];
  for (const t of scope) {
    if (out.has(t)) parent?.add(t);
    else t.dispose();
  }
  return result;
}

/**
 * Exempts `t` from every open {@linkcode tidy} scope (it will not be
 * disposed when they end) and returns it: for tensors that outlive the
 * scope, such as parameters, optimizer state or caches created lazily
 * inside a training step.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { keep, ops, type Tensor, tidy } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * let cache: Tensor | null = null;
 * tidy(() => {
 *   cache = keep(ops.full(be, [4], 1)); // survives the scope
 *   ops.full(be, [4], 2); // does not
 * });
 * assert.equal(be.memory.liveBytes, 16);
 * assert.equal(cache!.disposed, false);
 * ```
 */
export function keep<T extends Tensor>(t: T): T {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`keep: t must be a Tensor, got ${t === null ? "null" : typeof t}`);
  }
  for (const s of scopes) s.delete(t);
  return t;
}
