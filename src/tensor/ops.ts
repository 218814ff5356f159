/**
 * The public tensor operations. Each op checks its arguments (tensors alive
 * and on one backend, shapes compatible, scalars finite) and only then calls
 * the backend kernel of the same name, so a bad call throws a TypeError or
 * RangeError before any work is queued, identically on every backend.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, -2, 3, -4]), [2, 2]);
 * const y = ops.relu(ops.matmul(x, x, { transB: true }));
 * console.log(await y.toArray());
 * ```
 *
 * @module
 */

import type {
  AdamWParams,
  Backend,
  CrossEntropyResult,
  LayerNormResult,
  SGDParams,
} from "./backend.ts";
import { fmtShape } from "./_validate.ts";
import { Tensor } from "./tensor.ts";

// ---- validation helpers -----------------------------------------------------

const backendIds = new WeakMap<Backend, number>();
let nextBackendId = 1;

/** `cpu#1`: the backend's name plus an instance number, so two CPU backends differ. */
function backendLabel(b: Backend): string {
  let id = backendIds.get(b);
  if (id === undefined) {
    id = nextBackendId++;
    backendIds.set(b, id);
  }
  return `${b.name}#${id}`;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return `array of length ${v.length}`;
  if (typeof v === "object") return (v as object).constructor?.name ?? "object";
  return `${typeof v} ${String(v)}`;
}

function checkTensor(op: string, name: string, t: unknown): Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${describe(t)}`);
  }
  if (t.disposed) {
    throw new TypeError(`${op}: ${name} (shape ${fmtShape(t.shape)}) was used after dispose`);
  }
  return t;
}

/** Checks every named tensor is alive and that all share one backend. */
function checkTensors(op: string, named: Record<string, unknown>): Backend {
  let first: [string, Tensor] | null = null;
  for (const [name, t] of Object.entries(named)) {
    const tt = checkTensor(op, name, t);
    if (first === null) first = [name, tt];
    else if (tt.backend !== first[1].backend) {
      throw new TypeError(
        `${op}: ${first[0]} and ${name} are on different backends (${first[0]} on ${
          backendLabel(first[1].backend)
        }, ${name} on ${backendLabel(tt.backend)}); copy data across with toArray() and fromData()`,
      );
    }
  }
  return first![1].backend;
}

function checkFinite(op: string, name: string, v: unknown): number {
  if (typeof v !== "number") {
    throw new TypeError(`${op}: ${name} must be a number, got ${describe(v)}`);
  }
  if (!Number.isFinite(v)) {
    throw new RangeError(`${op}: ${name} must be a finite number, got ${v}`);
  }
  return v;
}

function checkBool(op: string, name: string, v: unknown): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") {
    throw new TypeError(`${op}: ${name} must be a boolean, got ${describe(v)}`);
  }
  return v;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function checkSameShape(op: string, an: string, a: Tensor, bn: string, b: Tensor): void {
  if (!sameShape(a.shape, b.shape)) {
    throw new RangeError(
      `${op}: shapes differ: ${an} ${fmtShape(a.shape)} vs ${bn} ${fmtShape(b.shape)}`,
    );
  }
}

function checkRank(op: string, name: string, t: Tensor, min: number): void {
  if (t.shape.length < min) {
    throw new RangeError(
      `${op}: ${name} must have at least ${min} dimension${min === 1 ? "" : "s"}, got shape ${
        fmtShape(t.shape)
      }`,
    );
  }
}

/** `v` must be 1-D of length `n` (a per-column vector such as a bias). */
function checkColVector(op: string, name: string, v: Tensor, xName: string, x: Tensor): void {
  if (v.shape.length !== 1 || v.shape[0] !== x.cols) {
    throw new RangeError(
      `${op}: ${name} must have shape [${x.cols}] (the last dimension of ${xName} ${
        fmtShape(x.shape)
      }), got ${fmtShape(v.shape)}`,
    );
  }
}

/** `v` must hold one value per row of `x`. */
function checkRowStat(op: string, name: string, v: Tensor, x: Tensor): void {
  if (v.size !== x.rows || v.shape.length !== 1) {
    throw new RangeError(
      `${op}: ${name} must have shape [${x.rows}] (one value per row of x ${
        fmtShape(x.shape)
      }), got ${fmtShape(v.shape)}`,
    );
  }
}

function checkNonEmptyRows(op: string, name: string, x: Tensor): void {
  if (x.shape.length === 0 || x.cols === 0) {
    throw new RangeError(
      `${op}: ${name} must have a non-empty last dimension, got shape ${fmtShape(x.shape)}`,
    );
  }
}

/** Targets of a row-wise classification: shape `[rows]` or the logits' leading dims. */
function checkTargets(op: string, logitsName: string, logits: Tensor, targets: Tensor): void {
  const lead = logits.shape.slice(0, -1);
  const rows = logits.rows;
  if (!(sameShape(targets.shape, [rows]) || sameShape(targets.shape, lead))) {
    throw new RangeError(
      `${op}: targets must have shape [${rows}] (one per row of ${logitsName} ${
        fmtShape(logits.shape)
      }), got ${fmtShape(targets.shape)}`,
    );
  }
}

function aliases(a: Tensor, b: Tensor): boolean {
  return a.storage === b.storage;
}

// ---- linear algebra and elementwise ----------------------------------------------

/** Options of {@linkcode matmul}. */
export interface MatmulOptions {
  /** Use the transpose of the last two dimensions of `a`. */
  readonly transA?: boolean;
  /** Use the transpose of the last two dimensions of `b`. */
  readonly transB?: boolean;
}

/**
 * Batched matrix product. `a` is `[...batch, M, K]` (`[...batch, K, M]` with
 * `transA`), `b` is `[...batch, K, N]` (`[...batch, N, K]` with `transB`) or
 * 2-D and shared by every batch entry. Returns `[...batch, M, N]`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * const c = ops.matmul(a, a, { transB: true }); // [2, 2]
 * console.log(await c.toArray()); // Float32Array [14, 32, 32, 77]
 * ```
 */
export function matmul(a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  const op = "matmul";
  const be = checkTensors(op, { a, b });
  if (opts === null || typeof opts !== "object") {
    throw new TypeError(`${op}: opts must be an object, got ${describe(opts)}`);
  }
  const transA = checkBool(op, "transA", opts.transA);
  const transB = checkBool(op, "transB", opts.transB);
  checkRank(op, "a", a, 2);
  checkRank(op, "b", b, 2);
  const ar = a.shape.length, br = b.shape.length;
  const kA = transA ? a.shape[ar - 2] : a.shape[ar - 1];
  const kB = transB ? b.shape[br - 1] : b.shape[br - 2];
  const what = `a ${fmtShape(a.shape)} (transA=${transA}) vs b ${
    fmtShape(b.shape)
  } (transB=${transB})`;
  if (br !== 2 && !sameShape(a.shape.slice(0, -2), b.shape.slice(0, -2))) {
    throw new RangeError(
      `${op}: batch dimensions differ (b must be 2-D or have a's batch dimensions): ${what}`,
    );
  }
  if (kA !== kB) throw new RangeError(`${op}: inner dimensions differ: ${what}`);
  return be.matmul(a, b, transA, transB);
}

/**
 * Elementwise `a + b` (same shapes).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.add(a, a).toArray()); // Float32Array [2, 4]
 * ```
 */
export function add(a: Tensor, b: Tensor): Tensor {
  const be = checkTensors("add", { a, b });
  checkSameShape("add", "a", a, "b", b);
  return be.add(a, b);
}

/**
 * Elementwise `a - b` (same shapes).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.sub(a, a).toArray()); // Float32Array [0, 0]
 * ```
 */
export function sub(a: Tensor, b: Tensor): Tensor {
  const be = checkTensors("sub", { a, b });
  checkSameShape("sub", "a", a, "b", b);
  return be.sub(a, b);
}

/**
 * Elementwise `a * b` (same shapes).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.mul(a, a).toArray()); // Float32Array [1, 4]
 * ```
 */
export function mul(a: Tensor, b: Tensor): Tensor {
  const be = checkTensors("mul", { a, b });
  checkSameShape("mul", "a", a, "b", b);
  return be.mul(a, b);
}

/**
 * `x + bias`, with `bias` of shape `[cols]` added to every row.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.zeros([2, 2]);
 * const b = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.addBias(x, b).toArray()); // Float32Array [1, 2, 1, 2]
 * ```
 */
export function addBias(x: Tensor, bias: Tensor): Tensor {
  const be = checkTensors("addBias", { x, bias });
  checkRank("addBias", "x", x, 1);
  checkColVector("addBias", "bias", bias, "x", x);
  return be.addBias(x, bias);
}

/**
 * `s * x`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.scale(x, 3).toArray()); // Float32Array [3, 6]
 * ```
 */
export function scale(x: Tensor, s: number): Tensor {
  const be = checkTensors("scale", { x });
  checkFinite("scale", "s", s);
  return be.scale(x, s);
}

/**
 * In place: `y += alpha * x` (same shapes; `x` may be `y` itself).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([1, 1]), [2]);
 * ops.axpyInPlace(y, 2, be.fromData(new Float32Array([1, 2]), [2]));
 * console.log(await y.toArray()); // Float32Array [3, 5]
 * ```
 */
export function axpyInPlace(y: Tensor, alpha: number, x: Tensor): void {
  const be = checkTensors("axpyInPlace", { y, x });
  checkFinite("axpyInPlace", "alpha", alpha);
  checkSameShape("axpyInPlace", "y", y, "x", x);
  // A GPU kernel cannot bind one buffer as both input and output, so an
  // aliased source is copied first; every backend then sees distinct storage.
  if (aliases(y, x)) {
    const tmp = be.copy(x);
    try {
      be.axpyInPlace(y, alpha, tmp);
    } finally {
      tmp.dispose();
    }
    return;
  }
  be.axpyInPlace(y, alpha, x);
}

/**
 * In place: `x ← s * x` (no temporary, unlike `scale`).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * ops.scaleInPlace(x, 3);
 * console.log(await x.toArray()); // Float32Array [3, 6]
 * ```
 */
export function scaleInPlace(x: Tensor, s: number): void {
  const be = checkTensors("scaleInPlace", { x });
  checkFinite("scaleInPlace", "s", s);
  be.scaleInPlace(x, s);
}

/**
 * In place: every element of `x` becomes `value`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.zeros([3]);
 * ops.fillInPlace(x, 7);
 * console.log(await x.toArray()); // Float32Array [7, 7, 7]
 * ```
 */
export function fillInPlace(x: Tensor, value: number): void {
  const be = checkTensors("fillInPlace", { x });
  checkFinite("fillInPlace", "value", value);
  be.fillInPlace(x, value);
}

/**
 * A fresh copy of `x` (its own storage).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.copy(x).toArray()); // Float32Array [1, 2]
 * ```
 */
export function copy(x: Tensor): Tensor {
  const be = checkTensors("copy", { x });
  return be.copy(x);
}

// ---- activations -------------------------------------------------------------------

/**
 * `max(x, 0)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([-1, 2]), [2]);
 * console.log(await ops.relu(x).toArray()); // Float32Array [0, 2]
 * ```
 */
export function relu(x: Tensor): Tensor {
  return checkTensors("relu", { x }).relu(x);
}

/**
 * ReLU input gradient: `dy * (x > 0)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([-1, 2]), [2]);
 * const dy = be.fromData(new Float32Array([5, 5]), [2]);
 * console.log(await ops.reluBackward(x, dy).toArray()); // Float32Array [0, 5]
 * ```
 */
export function reluBackward(x: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("reluBackward", { x, dy });
  checkSameShape("reluBackward", "x", x, "dy", dy);
  return be.reluBackward(x, dy);
}

/**
 * GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0, 1]), [2]);
 * console.log(await ops.gelu(x).toArray()); // ≈ [0, 0.8412]
 * ```
 */
export function gelu(x: Tensor): Tensor {
  return checkTensors("gelu", { x }).gelu(x);
}

/**
 * GELU input gradient: `dy * gelu'(x)` (tanh approximation).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0]), [1]);
 * const dy = be.fromData(new Float32Array([1]), [1]);
 * console.log(await ops.geluBackward(x, dy).toArray()); // Float32Array [0.5]
 * ```
 */
export function geluBackward(x: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("geluBackward", { x, dy });
  checkSameShape("geluBackward", "x", x, "dy", dy);
  return be.geluBackward(x, dy);
}

/**
 * `tanh(x)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([0]), [1]);
 * console.log(await ops.tanh(x).toArray()); // Float32Array [0]
 * ```
 */
export function tanh(x: Tensor): Tensor {
  return checkTensors("tanh", { x }).tanh(x);
}

/**
 * Tanh input gradient from its output: `dy * (1 - y²)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([0.5]), [1]);
 * const dy = be.fromData(new Float32Array([1]), [1]);
 * console.log(await ops.tanhBackward(y, dy).toArray()); // Float32Array [0.75]
 * ```
 */
export function tanhBackward(y: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("tanhBackward", { y, dy });
  checkSameShape("tanhBackward", "y", y, "dy", dy);
  return be.tanhBackward(y, dy);
}

// ---- softmax and layer norm ----------------------------------------------------------

/** Options of {@linkcode softmax}. */
export interface SoftmaxOptions {
  /**
   * Causal mask: `x` is `[..., T, T]` and entry `j` of row `i` (`i` = row
   * index mod T) gets probability exactly 0 when `j > i`.
   */
  readonly causal?: boolean;
}

/**
 * Softmax over the last dimension (numerically stable: the row maximum is
 * subtracted first).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.zeros([2, 2]);
 * console.log(await ops.softmax(x, { causal: true }).toArray()); // [1, 0, 0.5, 0.5]
 * ```
 */
export function softmax(x: Tensor, opts: SoftmaxOptions = {}): Tensor {
  const op = "softmax";
  const be = checkTensors(op, { x });
  if (opts === null || typeof opts !== "object") {
    throw new TypeError(`${op}: opts must be an object, got ${describe(opts)}`);
  }
  const causal = checkBool(op, "causal", opts.causal);
  checkRank(op, "x", x, 1);
  if (causal) {
    const r = x.shape.length;
    if (r < 2 || x.shape[r - 2] !== x.shape[r - 1]) {
      throw new RangeError(
        `${op}: causal softmax needs x of shape [..., T, T], got ${fmtShape(x.shape)}`,
      );
    }
  }
  return be.softmax(x, causal);
}

/**
 * Softmax input gradient from its output: `y * (dy - Σ_row(dy * y))`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([0.5, 0.5]), [1, 2]);
 * const dy = be.fromData(new Float32Array([1, 0]), [1, 2]);
 * console.log(await ops.softmaxBackward(y, dy).toArray()); // [0.25, -0.25]
 * ```
 */
export function softmaxBackward(y: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("softmaxBackward", { y, dy });
  checkRank("softmaxBackward", "y", y, 1);
  checkSameShape("softmaxBackward", "y", y, "dy", dy);
  return be.softmaxBackward(y, dy);
}

/**
 * Layer norm over the last dimension: `(x - mean) * rstd * gamma + beta`,
 * with `rstd = 1 / sqrt(var + eps)` (population variance). Returns the
 * output and the per-row `mean` and `rstd` (`[rows]`) that backward needs.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const { y } = ops.layerNorm(x, g, be.zeros([2]));
 * console.log(await y.toArray()); // ≈ [-1, 1]
 * ```
 */
export function layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps = 1e-5): LayerNormResult {
  const op = "layerNorm";
  const be = checkTensors(op, { x, gamma, beta });
  checkNonEmptyRows(op, "x", x);
  checkColVector(op, "gamma", gamma, "x", x);
  checkColVector(op, "beta", beta, "x", x);
  if (checkFinite(op, "eps", eps) <= 0) {
    throw new RangeError(`${op}: eps must be positive, got ${eps}`);
  }
  return be.layerNorm(x, gamma, beta, eps);
}

function checkLayerNormBackward(
  op: string,
  dy: Tensor,
  x: Tensor,
  mean: Tensor,
  rstd: Tensor,
): void {
  checkNonEmptyRows(op, "x", x);
  checkSameShape(op, "dy", dy, "x", x);
  checkRowStat(op, "mean", mean, x);
  checkRowStat(op, "rstd", rstd, x);
}

/**
 * Layer norm input gradient (the B pass), from the forward's `mean` and `rstd`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const { mean, rstd } = ops.layerNorm(x, g, be.zeros([2]));
 * const dx = ops.layerNormBackwardInput(be.fromData(new Float32Array([1, 1]), [1, 2]), x, mean, rstd, g);
 * console.log(await dx.toArray()); // ≈ [0, 0]
 * ```
 */
export function layerNormBackwardInput(
  dy: Tensor,
  x: Tensor,
  mean: Tensor,
  rstd: Tensor,
  gamma: Tensor,
): Tensor {
  const op = "layerNormBackwardInput";
  const be = checkTensors(op, { dy, x, mean, rstd, gamma });
  checkLayerNormBackward(op, dy, x, mean, rstd);
  checkColVector(op, "gamma", gamma, "x", x);
  return be.layerNormBackwardInput(dy, x, mean, rstd, gamma);
}

/**
 * Layer norm weight gradients (the W pass): `dgamma = Σ_rows dy·x̂`,
 * `dbeta = Σ_rows dy`, each `[cols]`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const { mean, rstd } = ops.layerNorm(x, g, be.zeros([2]));
 * const dy = be.fromData(new Float32Array([1, 1]), [1, 2]);
 * const { dbeta } = ops.layerNormBackwardWeight(dy, x, mean, rstd);
 * console.log(await dbeta.toArray()); // Float32Array [1, 1]
 * ```
 */
export function layerNormBackwardWeight(
  dy: Tensor,
  x: Tensor,
  mean: Tensor,
  rstd: Tensor,
): { dgamma: Tensor; dbeta: Tensor } {
  const op = "layerNormBackwardWeight";
  const be = checkTensors(op, { dy, x, mean, rstd });
  checkLayerNormBackward(op, dy, x, mean, rstd);
  return be.layerNormBackwardWeight(dy, x, mean, rstd);
}

// ---- reductions -------------------------------------------------------------------

/**
 * Sum over all rows: `[..., N]` → `[N]` (bias gradients).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * console.log(await ops.sumRows(x).toArray()); // Float32Array [4, 6]
 * ```
 */
export function sumRows(x: Tensor): Tensor {
  const be = checkTensors("sumRows", { x });
  checkRank("sumRows", "x", x, 1);
  return be.sumRows(x);
}

/**
 * Sum of all elements, shape `[1]`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3]), [3]);
 * console.log(await ops.sum(x).toArray()); // Float32Array [6]
 * ```
 */
export function sum(x: Tensor): Tensor {
  return checkTensors("sum", { x }).sum(x);
}

/**
 * Sum of squares of all elements, shape `[1]` (global-norm clipping).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2]), [2]);
 * console.log(await ops.sumSquares(x).toArray()); // Float32Array [5]
 * ```
 */
export function sumSquares(x: Tensor): Tensor {
  return checkTensors("sumSquares", { x }).sumSquares(x);
}

// ---- losses and embeddings ----------------------------------------------------------

/**
 * Softmax cross-entropy of `logits` `[rows, classes]` against integer class
 * indices `targets` `[rows]`: per-row `loss` and the `probs` backward needs.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const logits = be.zeros([1, 4]);
 * const t = be.fromData(new Float32Array([2]), [1]);
 * console.log(await ops.crossEntropy(logits, t).loss.toArray()); // ≈ [ln 4]
 * ```
 */
export function crossEntropy(logits: Tensor, targets: Tensor): CrossEntropyResult {
  const op = "crossEntropy";
  const be = checkTensors(op, { logits, targets });
  checkNonEmptyRows(op, "logits", logits);
  checkTargets(op, "logits", logits, targets);
  return be.crossEntropy(logits, targets);
}

/**
 * Cross-entropy gradient wrt the logits: `(probs - onehot(targets)) * scale`
 * (`scale` is typically 1 / number of rows of the full batch).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const p = be.fromData(new Float32Array([0.5, 0.5]), [1, 2]);
 * const t = be.fromData(new Float32Array([0]), [1]);
 * console.log(await ops.crossEntropyBackward(p, t, 1).toArray()); // [-0.5, 0.5]
 * ```
 */
export function crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor {
  const op = "crossEntropyBackward";
  const be = checkTensors(op, { probs, targets });
  checkNonEmptyRows(op, "probs", probs);
  checkTargets(op, "probs", probs, targets);
  checkFinite(op, "scale", scale);
  return be.crossEntropyBackward(probs, targets, scale);
}

/**
 * Row gather: `table` `[V, C]` and integer `ids` of any shape → `[...ids.shape, C]`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const table = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const ids = be.fromData(new Float32Array([1, 1, 0]), [3]);
 * console.log(await ops.embedding(table, ids).toArray()); // [3, 4, 3, 4, 1, 2]
 * ```
 */
export function embedding(table: Tensor, ids: Tensor): Tensor {
  const op = "embedding";
  const be = checkTensors(op, { table, ids });
  if (table.shape.length !== 2) {
    throw new RangeError(`${op}: table must be 2-D [V, C], got shape ${fmtShape(table.shape)}`);
  }
  return be.embedding(table, ids);
}

/**
 * In place scatter-add: `dTable[ids[i]] += dy[i]` for every position `i`;
 * `dy` is `[...ids.shape, C]`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const dTable = be.zeros([2, 1]);
 * const ids = be.fromData(new Float32Array([1, 1]), [2]);
 * ops.embeddingBackwardInPlace(dTable, ids, be.fromData(new Float32Array([1, 2]), [2, 1]));
 * console.log(await dTable.toArray()); // Float32Array [0, 3]
 * ```
 */
export function embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void {
  const op = "embeddingBackwardInPlace";
  const be = checkTensors(op, { dTable, ids, dy });
  if (dTable.shape.length !== 2) {
    throw new RangeError(`${op}: dTable must be 2-D [V, C], got shape ${fmtShape(dTable.shape)}`);
  }
  const C = dTable.shape[1];
  if (dy.cols !== C || dy.size !== ids.size * C || dy.shape.length === 0) {
    throw new RangeError(
      `${op}: dy must have shape ${fmtShape([...ids.shape, C])} (ids ${
        fmtShape(ids.shape)
      } by dTable columns ${C}), got ${fmtShape(dy.shape)}`,
    );
  }
  if (aliases(dTable, dy) || aliases(dTable, ids)) {
    throw new RangeError(`${op}: dTable must not share storage with ids or dy`);
  }
  be.embeddingBackwardInPlace(dTable, ids, dy);
}

// ---- optimizer -----------------------------------------------------------------------

/**
 * In place: `dst` becomes a copy of `src` (same shapes; on WebGPU one
 * buffer-to-buffer copy). Copying a tensor onto itself (or onto a view of
 * its storage) changes nothing.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const dst = be.zeros([2]);
 * ops.copyInPlace(dst, be.fromData(new Float32Array([1, 2]), [2]));
 * console.log(await dst.toArray()); // Float32Array [1, 2]
 * ```
 */
export function copyInPlace(dst: Tensor, src: Tensor): void {
  const be = checkTensors("copyInPlace", { dst, src });
  checkSameShape("copyInPlace", "dst", dst, "src", src);
  // Views share all of their storage, so an aliased copy is the identity
  // (and a GPU cannot copy a buffer onto itself).
  if (aliases(dst, src)) return;
  be.copyInPlace(dst, src);
}

/**
 * In place AdamW update with bias correction and decoupled weight decay:
 * `m = β1 m + (1-β1) g`, `v = β2 v + (1-β2) g²`, then
 * `p -= lr * (m̂ / (sqrt(v̂) + eps) + weightDecay * p)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const p = be.fromData(new Float32Array([1]), [1]);
 * const g = be.fromData(new Float32Array([1]), [1]);
 * const hp = { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1 };
 * ops.adamwInPlace(p, g, be.zeros([1]), be.zeros([1]), hp);
 * console.log(await p.toArray()); // ≈ [0.9]
 * ```
 */
export function adamwInPlace(
  param: Tensor,
  grad: Tensor,
  m: Tensor,
  v: Tensor,
  hp: AdamWParams,
): void {
  const op = "adamwInPlace";
  const be = checkTensors(op, { param, grad, m, v });
  checkSameShape(op, "param", param, "grad", grad);
  checkSameShape(op, "param", param, "m", m);
  checkSameShape(op, "param", param, "v", v);
  const named: [string, Tensor][] = [["param", param], ["grad", grad], ["m", m], ["v", v]];
  for (let i = 0; i < named.length; i++) {
    for (let j = i + 1; j < named.length; j++) {
      if (aliases(named[i][1], named[j][1])) {
        throw new RangeError(`${op}: ${named[i][0]} and ${named[j][0]} must not share storage`);
      }
    }
  }
  if (hp === null || typeof hp !== "object") {
    throw new TypeError(`${op}: hp must be an AdamWParams object, got ${describe(hp)}`);
  }
  const lr = checkFinite(op, "hp.lr", hp.lr);
  if (lr < 0) throw new RangeError(`${op}: hp.lr must be non-negative, got ${lr}`);
  for (const k of ["beta1", "beta2"] as const) {
    const b = checkFinite(op, `hp.${k}`, hp[k]);
    if (b < 0 || b >= 1) throw new RangeError(`${op}: hp.${k} must be in [0, 1), got ${b}`);
  }
  const eps = checkFinite(op, "hp.eps", hp.eps);
  if (eps <= 0) throw new RangeError(`${op}: hp.eps must be positive, got ${eps}`);
  const wd = checkFinite(op, "hp.weightDecay", hp.weightDecay);
  if (wd < 0) throw new RangeError(`${op}: hp.weightDecay must be non-negative, got ${wd}`);
  const step = checkFinite(op, "hp.step", hp.step);
  if (!Number.isInteger(step) || step < 1) {
    throw new RangeError(`${op}: hp.step must be an integer >= 1, got ${step}`);
  }
  be.adamwInPlace(param, grad, m, v, hp);
}

/**
 * In place SGD update in one pass, as PyTorch's `SGD` without dampening or
 * Nesterov: `d = g + weightDecay·p`; with a momentum buffer `buf` (same
 * shape, updated too) `buf ← momentum·buf + d` and `d = buf`; then
 * `p ← p − lr·d`. A zero-filled `buf` gives PyTorch's first step
 * (`buf = d`). Pass `null` for `buf` when `momentum` is 0.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const p = be.fromData(new Float32Array([1]), [1]);
 * const g = be.fromData(new Float32Array([2]), [1]);
 * ops.sgdInPlace(p, g, be.zeros([1]), { lr: 0.1, momentum: 0.9, weightDecay: 0 });
 * console.log(await p.toArray()); // ≈ [0.8]
 * ```
 */
export function sgdInPlace(
  param: Tensor,
  grad: Tensor,
  buf: Tensor | null,
  hp: SGDParams,
): void {
  const op = "sgdInPlace";
  const named: [string, Tensor][] = [["param", param], ["grad", grad]];
  if (buf !== null) named.push(["buf", buf]);
  const be = checkTensors(op, Object.fromEntries(named));
  checkSameShape(op, "param", param, "grad", grad);
  if (buf !== null) checkSameShape(op, "param", param, "buf", buf);
  for (let i = 0; i < named.length; i++) {
    for (let j = i + 1; j < named.length; j++) {
      if (aliases(named[i][1], named[j][1])) {
        throw new RangeError(`${op}: ${named[i][0]} and ${named[j][0]} must not share storage`);
      }
    }
  }
  if (hp === null || typeof hp !== "object") {
    throw new TypeError(`${op}: hp must be an SGDParams object, got ${describe(hp)}`);
  }
  const lr = checkFinite(op, "hp.lr", hp.lr);
  if (lr < 0) throw new RangeError(`${op}: hp.lr must be non-negative, got ${lr}`);
  const mu = checkFinite(op, "hp.momentum", hp.momentum);
  if (mu < 0 || mu >= 1) throw new RangeError(`${op}: hp.momentum must be in [0, 1), got ${mu}`);
  if (buf === null && mu !== 0) {
    throw new RangeError(`${op}: hp.momentum ${mu} needs a momentum buffer, got buf null`);
  }
  const wd = checkFinite(op, "hp.weightDecay", hp.weightDecay);
  if (wd < 0) throw new RangeError(`${op}: hp.weightDecay must be non-negative, got ${wd}`);
  be.sgdInPlace(param, grad, buf, hp);
}

// ---- layout ----------------------------------------------------------------------------

/**
 * Copy of rows `[start, end)` along dimension 0 (micro-batches are row ranges).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2]);
 * console.log(await ops.sliceRows(x, 1, 3).toArray()); // Float32Array [3, 4, 5, 6]
 * ```
 */
export function sliceRows(x: Tensor, start: number, end: number): Tensor {
  const op = "sliceRows";
  const be = checkTensors(op, { x });
  checkRank(op, "x", x, 1);
  const n = x.shape[0];
  if (
    !Number.isInteger(start) || !Number.isInteger(end) || start < 0 || start > end || end > n
  ) {
    throw new RangeError(
      `${op}: need integers 0 <= start <= end <= ${n} (dimension 0 of x ${
        fmtShape(x.shape)
      }), got start ${start}, end ${end}`,
    );
  }
  return be.sliceRows(x, start, end);
}

/**
 * Concatenation along dimension 0; all other dimensions must match.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [1, 2]);
 * console.log((ops.concatRows([a, a, a])).shape); // [3, 2]
 * ```
 */
export function concatRows(parts: readonly Tensor[]): Tensor {
  const op = "concatRows";
  if (!Array.isArray(parts)) {
    throw new TypeError(`${op}: parts must be an array of tensors, got ${describe(parts)}`);
  }
  if (parts.length === 0) throw new RangeError(`${op}: parts must not be empty, got 0 tensors`);
  const named: Record<string, unknown> = {};
  parts.forEach((p, i) => (named[`parts[${i}]`] = p));
  const be = checkTensors(op, named);
  const first = parts[0];
  checkRank(op, "parts[0]", first, 1);
  const rest = first.shape.slice(1);
  for (let i = 1; i < parts.length; i++) {
    const s = parts[i].shape;
    if (s.length !== first.shape.length || !sameShape(s.slice(1), rest)) {
      throw new RangeError(
        `${op}: parts[${i}] has shape ${fmtShape(s)} but parts[0] has ${
          fmtShape(first.shape)
        }; all dimensions but the first must match`,
      );
    }
  }
  return be.concatRows(parts);
}

/** Highest rank {@linkcode permute} accepts. */
export const MAX_PERMUTE_RANK = 6;

/**
 * Axis permutation (a copy): output dimension `i` is input dimension
 * `perm[i]`. Ranks up to {@linkcode MAX_PERMUTE_RANK}.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * console.log(await ops.permute(x, [1, 0]).toArray()); // [1, 4, 2, 5, 3, 6]
 * ```
 */
export function permute(x: Tensor, perm: readonly number[]): Tensor {
  const op = "permute";
  const be = checkTensors(op, { x });
  if (!Array.isArray(perm)) {
    throw new TypeError(`${op}: perm must be an array, got ${describe(perm)}`);
  }
  const rank = x.shape.length;
  if (rank > MAX_PERMUTE_RANK) {
    throw new RangeError(
      `${op}: rank must be at most ${MAX_PERMUTE_RANK}, got x of shape ${fmtShape(x.shape)}`,
    );
  }
  const seen = new Set<number>();
  const bad = perm.length !== rank ||
    perm.some((p) => !Number.isInteger(p) || p < 0 || p >= rank || seen.size === seen.add(p).size);
  if (bad) {
    throw new RangeError(
      `${op}: perm must be a permutation of 0..${rank - 1} (x has shape ${
        fmtShape(x.shape)
      }), got [${perm.join(", ")}]`,
    );
  }
  return be.permute(x, perm);
}
