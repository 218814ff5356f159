/**
 * The CPU reference backend: Float32Array storage and plain synchronous
 * loops. It defines what every other backend's kernels must compute.
 *
 * @module
 */

import type * as B from "../backend.ts";
import { MemoryTracker } from "../_memory.ts";
import { rowCount } from "../_rows.ts";
import { checkFromData, checkZeros, firstInvalidIndex } from "../_validate.ts";
import { createTensor, shapeSize, type Tensor, tensorStorage } from "../tensor.ts";
import { dropoutBase, dropoutKey, dropoutScale, dropoutThreshold } from "../_dropout_hash.ts";
import {
  binaryInto,
  dropoutInto,
  type Operand,
  sumToShapeInto,
  unaryBackwardInto,
  unaryInto,
  whereInto,
} from "./_elementwise.ts";
import { permuteInto } from "./_layout.ts";
import { matmulInto } from "./_matmul.ts";
import { ArrayPool } from "./_array_pool.ts";
import { checkPoolBytes, type CpuBackendOptions } from "./backend_options.ts";
import {
  logSumExpInto,
  rmsNormBackwardInputInto,
  rmsNormBackwardWeight,
  rmsNormInto,
} from "./_rows.ts";

export type { CpuBackendOptions };

/** Storage of a CPU tensor; a TypeError once its backend is closed. */
function data(t: Tensor): Float32Array {
  if (t.backend.closed) throw closedError();
  return tensorStorage(t) as Float32Array;
}

/** A CPU tensor as an operand of the broadcasting loops. */
function operand(t: Tensor): Operand {
  return { data: data(t), shape: t.shape };
}

function closedError(): TypeError {
  return new TypeError("CPU backend used after close(); create a new backend");
}

/**
 * The CPU reference backend. Kernels run synchronously on Float32Array
 * storage; sums are accumulated in JS numbers (f64) and stored as f32.
 *
 * Integer inputs (embedding ids, cross-entropy targets) are checked by the
 * ops before any kernel runs, through {@linkcode CpuBackend.invalidIndex}.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const c = ops.matmul(a, a);
 * console.log(await c.toArray()); // Float32Array [7, 10, 15, 22]
 * ```
 */
export class CpuBackend implements B.Backend {
  /** Always `"cpu"`. */
  readonly name: B.BackendName = "cpu";
  /** Human-readable description. */
  readonly description: string = "CPU reference (Float32Array)";
  readonly #memory = new MemoryTracker();
  readonly #pool: ArrayPool;
  #closed = false;

  /**
   * A CPU backend.
   *
   * @param options `poolBytes`: how many bytes of disposed tensors' storage
   * to keep for reuse (default 256 MiB; 0 keeps none).
   * @throws {TypeError} When `options` is not an object, names an unknown
   * option, or `poolBytes` is not a number.
   * @throws {RangeError} When `poolBytes` is not a non-negative integer.
   */
  constructor(options: CpuBackendOptions = {}) {
    this.#pool = new ArrayPool(checkPoolBytes(options));
  }

  /** Memory accounting of tensors created on this backend. */
  get memory(): B.MemoryStats {
    return this.#memory;
  }

  /**
   * Statistics of the pool of Float32Arrays behind the tensors: a disposed
   * tensor's storage is kept (up to `poolBytes`) for the next tensor of its
   * size. Tensors of at most 16 values are neither kept nor counted.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { CpuBackend } from "@conveyor/core";
   * const be = new CpuBackend();
   * be.zeros([256, 256]).dispose();
   * be.zeros([256, 256]).dispose(); // the first one's storage again
   * assert.equal(be.pool.created, 1);
   * assert.equal(be.pool.reused, 1);
   * assert.equal(be.pool.idleBytes, 256 * 256 * 4);
   * ```
   */
  get pool(): B.BufferPoolStats {
    return this.#pool.stats;
  }

  // Every tensor's storage comes from the pool (see `_array_pool.ts`): zeros
  // unless `zero` is false, when the caller overwrites every value.
  #alloc(shape: B.Shape, zero = true): [Tensor, Float32Array] {
    if (this.#closed) throw closedError();
    const buf = this.#pool.acquire(shapeSize(shape), zero);
    this.#memory.alloc(buf.byteLength);
    return [createTensor(this, shape, buf, buf.byteLength), buf];
  }

  // A tensor holding `values` rounded to f32.
  #fromValues(shape: B.Shape, values: ArrayLike<number>): Tensor {
    const [out, O] = this.#alloc(shape, false);
    O.set(values);
    return out;
  }

  // ---- storage -----------------------------------------------------------

  /** Creates a tensor holding a copy of `data`. */
  fromData(data: Float32Array, shape: B.Shape): Tensor {
    checkFromData(data, shape);
    return this.#fromValues(shape, data);
  }

  /** Creates a tensor of zeros. */
  zeros(shape: B.Shape): Tensor {
    checkZeros(shape);
    return this.#alloc(shape)[0];
  }

  /** Creates a tensor with every element `value`. */
  full(shape: B.Shape, value: number): Tensor {
    checkZeros(shape);
    const [out, O] = this.#alloc(shape, false);
    O.fill(value);
    return out;
  }

  /** The first entry of `ids` that is not an integer in [0, n), or null. */
  invalidIndex(ids: Tensor, n: number): B.InvalidIndex | null {
    return firstInvalidIndex(data(ids), n);
  }

  /** Copies a tensor's contents out. */
  read(t: Tensor): Promise<Float32Array> {
    // A throw (closed backend) becomes a rejection, as on every backend.
    return new Promise((resolve) => resolve(this.readSync(t)));
  }

  /** Copies a tensor's contents out now (the data is in host memory). */
  readSync(t: Tensor): Float32Array {
    return data(t).slice();
  }

  /** Releases storage (called by `Tensor.dispose`): kept for reuse up to `poolBytes`. */
  release(storage: unknown, bytes: number): void {
    this.#memory.free(bytes);
    if (!this.#closed && storage instanceof Float32Array) this.#pool.release(storage);
  }

  /** No-op: CPU kernels run synchronously. */
  flush(): void {}

  /** Resolves at once: CPU kernels run synchronously (rejects once closed). */
  sync(): Promise<void> {
    return this.#closed ? Promise.reject(closedError()) : Promise.resolve();
  }

  /** True once `close()` has been called: every later op throws a TypeError. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Marks the backend closed: every later op, `fromData` or `read` throws a
   * TypeError. The pool's idle storage is dropped (for the garbage
   * collector; nothing else to release); disposing tensors afterwards is
   * harmless.
   */
  close(): void {
    this.#closed = true;
    this.#pool.trim();
  }

  // ---- kernels -------------------------------------------------------------

  /** Batched matrix product (see `Backend.matmul`). */
  matmul(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
    const ar = a.shape.length, br = b.shape.length;
    const M = transA ? a.shape[ar - 1] : a.shape[ar - 2];
    const K = transA ? a.shape[ar - 2] : a.shape[ar - 1];
    const N = transB ? b.shape[br - 2] : b.shape[br - 1];
    const batch = shapeSize(a.shape.slice(0, -2));
    const [out, C] = this.#alloc([...a.shape.slice(0, -2), M, N]);
    matmulInto(data(a), data(b), C, batch, M, K, N, transA, transB, br === 2);
    return out;
  }

  /** `x + bias` broadcast over rows. */
  addBias(x: Tensor, bias: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x), Bv = data(bias);
    const n = x.cols, rows = x.size / (n || 1);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      for (let j = 0; j < n; j++) O[o + j] = X[o + j] + Bv[j];
    }
    return out;
  }

  /** `s * x`. */
  scale(x: Tensor, s: number): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x);
    for (let i = 0; i < O.length; i++) O[i] = X[i] * s;
    return out;
  }

  /** In place `y += alpha * x`. */
  axpyInPlace(y: Tensor, alpha: number, x: Tensor): void {
    const Y = data(y), X = data(x);
    for (let i = 0; i < Y.length; i++) Y[i] += alpha * X[i];
  }

  /** In place fill. */
  fillInPlace(x: Tensor, value: number): void {
    data(x).fill(value);
  }

  /** A fresh copy. */
  copy(x: Tensor): Tensor {
    return this.#fromValues(x.shape, data(x));
  }

  /** In place `dst ← src`. */
  copyInPlace(dst: Tensor, src: Tensor): void {
    data(dst).set(data(src));
  }

  /** In place `x ← s * x`. */
  scaleInPlace(x: Tensor, s: number): void {
    const X = data(x);
    for (let i = 0; i < X.length; i++) X[i] *= s;
  }

  /** Elementwise unary op (`_elementwise_ops.ts`); NaN kept. */
  unary(op: B.UnaryOp, x: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    unaryInto(op, data(x), O);
    return out;
  }

  /** Unary input gradient from `v` (x or y) and `dy`. */
  unaryBackward(op: B.UnaryGradOp, v: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(v.shape);
    unaryBackwardInto(op, data(v), data(dy), O);
    return out;
  }

  /** `a (op) b` broadcast to `out`. */
  binary(op: B.BinaryOp, a: Tensor, b: Tensor, out: B.Shape): Tensor {
    const [t, O] = this.#alloc(out);
    binaryInto(op, operand(a), operand(b), out, O);
    return t;
  }

  /** `cond ≠ 0 ? a : b` broadcast to `out`. */
  where(cond: Tensor, a: Tensor, b: Tensor, out: B.Shape): Tensor {
    const [t, O] = this.#alloc(out);
    whereInto(operand(cond), operand(a), operand(b), out, O);
    return t;
  }

  /** Sum over the axes where `shape` has extent 1. */
  sumToShape(x: Tensor, shape: B.Shape): Tensor {
    const [t, O] = this.#alloc(shape);
    sumToShapeInto(data(x), x.shape, shape, O);
    return t;
  }

  /** Dropout with the counter-based mask (`_dropout_hash.ts`). */
  dropout(x: Tensor, p: number, seed: number, step: number, rowOffset: number): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const rowSize = shapeSize(x.shape.slice(1));
    dropoutInto(
      data(x),
      O,
      dropoutKey(seed, step),
      dropoutBase(rowOffset, rowSize),
      dropoutThreshold(p),
      dropoutScale(p),
    );
    return out;
  }

  /** Row softmax, optionally causal. */
  softmax(x: Tensor, causal: boolean): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x);
    const n = x.cols, rows = rowCount(x);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      // Row r of a [..., T, T] score block is query r mod T (T = n).
      const lim = causal ? (r % n) + 1 : n;
      let mx = -Infinity;
      for (let j = 0; j < lim; j++) if (X[o + j] > mx) mx = X[o + j];
      let s = 0;
      for (let j = 0; j < lim; j++) {
        const e = Math.exp(X[o + j] - mx);
        O[o + j] = e;
        s += e;
      }
      const inv = 1 / s;
      for (let j = 0; j < lim; j++) O[o + j] *= inv;
      // Entries past lim stay 0 (fresh storage).
    }
    return out;
  }

  /** Softmax input gradient. */
  softmaxBackward(y: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(y.shape);
    const Y = data(y), G = data(dy);
    const n = y.cols, rows = rowCount(y);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      let dot = 0;
      for (let j = 0; j < n; j++) dot += Y[o + j] * G[o + j];
      for (let j = 0; j < n; j++) O[o + j] = Y[o + j] * (G[o + j] - dot);
    }
    return out;
  }

  /** Layer norm forward. */
  layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): B.LayerNormResult {
    const n = x.cols, rows = rowCount(x);
    const [y, Y] = this.#alloc(x.shape);
    const [mean, Mn] = this.#alloc([rows]);
    const [rstd, Rs] = this.#alloc([rows]);
    const X = data(x), Gm = data(gamma), Bt = data(beta);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      let s = 0;
      for (let j = 0; j < n; j++) s += X[o + j];
      const mu = s / n;
      let v = 0;
      for (let j = 0; j < n; j++) {
        const d = X[o + j] - mu;
        v += d * d;
      }
      const rs = 1 / Math.sqrt(v / n + eps);
      Mn[r] = mu;
      Rs[r] = rs;
      // Use the stored f32 statistics so backward sees exactly what forward used.
      const muF = Mn[r], rsF = Rs[r];
      for (let j = 0; j < n; j++) Y[o + j] = (X[o + j] - muF) * rsF * Gm[j] + Bt[j];
    }
    return { y, mean, rstd };
  }

  /** Layer norm input gradient. */
  layerNormBackwardInput(dy: Tensor, x: Tensor, stats: B.LayerNormStats, gamma: Tensor): Tensor {
    const n = x.cols, rows = rowCount(x);
    const [out, O] = this.#alloc(x.shape);
    const X = data(x), G = data(dy), Mn = data(stats.mean), Rs = data(stats.rstd);
    const Gm = data(gamma);
    for (let r = 0; r < rows; r++) {
      const o = r * n, mu = Mn[r], rs = Rs[r];
      let sg = 0, sgx = 0;
      for (let j = 0; j < n; j++) {
        const g = G[o + j] * Gm[j];
        sg += g;
        sgx += g * (X[o + j] - mu) * rs;
      }
      sg /= n;
      sgx /= n;
      for (let j = 0; j < n; j++) {
        const xh = (X[o + j] - mu) * rs;
        O[o + j] = rs * (G[o + j] * Gm[j] - sg - xh * sgx);
      }
    }
    return out;
  }

  /** Layer norm weight gradients. */
  layerNormBackwardWeight(
    dy: Tensor,
    x: Tensor,
    stats: B.LayerNormStats,
  ): { dgamma: Tensor; dbeta: Tensor } {
    const n = x.cols, rows = rowCount(x);
    const X = data(x), G = data(dy), Mn = data(stats.mean), Rs = data(stats.rstd);
    const dg = new Float64Array(n), db = new Float64Array(n);
    for (let r = 0; r < rows; r++) {
      const o = r * n, mu = Mn[r], rs = Rs[r];
      for (let j = 0; j < n; j++) {
        const g = G[o + j];
        dg[j] += g * (X[o + j] - mu) * rs;
        db[j] += g;
      }
    }
    return {
      dgamma: this.#fromValues([n], dg),
      dbeta: this.#fromValues([n], db),
    };
  }

  /** RMS norm forward. */
  rmsNorm(x: Tensor, weight: Tensor, eps: number): B.RmsNormResult {
    const n = x.cols, rows = rowCount(x);
    const [y, Y] = this.#alloc(x.shape);
    const [rstd, Rs] = this.#alloc([rows]);
    rmsNormInto(data(x), data(weight), eps, rows, n, Y, Rs);
    return { y, rstd };
  }

  /** RMS norm input gradient. */
  rmsNormBackwardInput(dy: Tensor, x: Tensor, rstd: Tensor, weight: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    rmsNormBackwardInputInto(data(dy), data(x), data(rstd), data(weight), rowCount(x), x.cols, O);
    return out;
  }

  /** RMS norm weight gradient. */
  rmsNormBackwardWeight(dy: Tensor, x: Tensor, rstd: Tensor): Tensor {
    const n = x.cols;
    return this.#fromValues(
      [n],
      rmsNormBackwardWeight(data(dy), data(x), data(rstd), rowCount(x), n),
    );
  }

  /** Row-wise log Σ exp. */
  logSumExp(x: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape.slice(0, -1));
    logSumExpInto(data(x), rowCount(x), x.cols, O);
    return out;
  }

  /** Column sums `[..., N]` → `[N]`. */
  sumRows(x: Tensor): Tensor {
    const n = x.cols, rows = rowCount(x);
    const X = data(x), acc = new Float64Array(n);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      for (let j = 0; j < n; j++) acc[j] += X[o + j];
    }
    return this.#fromValues([n], acc);
  }

  /** Sum of all elements, `[1]`. */
  sum(x: Tensor): Tensor {
    const X = data(x);
    let s = 0;
    for (let i = 0; i < X.length; i++) s += X[i];
    return this.#fromValues([1], [s]);
  }

  /** Sum of squares, `[1]`. */
  sumSquares(x: Tensor): Tensor {
    const X = data(x);
    let s = 0;
    for (let i = 0; i < X.length; i++) s += X[i] * X[i];
    return this.#fromValues([1], [s]);
  }

  /** Softmax cross-entropy forward. */
  crossEntropy(logits: Tensor, targets: Tensor): B.CrossEntropyResult {
    const n = logits.cols, rows = rowCount(logits);
    const T = data(targets);
    const X = data(logits);
    const [probs, P] = this.#alloc(logits.shape);
    const [loss, L] = this.#alloc([rows]);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      let mx = -Infinity;
      for (let j = 0; j < n; j++) if (X[o + j] > mx) mx = X[o + j];
      let s = 0;
      for (let j = 0; j < n; j++) {
        const e = Math.exp(X[o + j] - mx);
        P[o + j] = e;
        s += e;
      }
      const inv = 1 / s;
      for (let j = 0; j < n; j++) P[o + j] *= inv;
      L[r] = Math.log(s) - (X[o + T[r]] - mx);
    }
    return { loss, probs };
  }

  /** `(probs - onehot(targets)) * scale`. */
  crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor {
    const n = probs.cols, rows = rowCount(probs);
    const T = data(targets);
    const P = data(probs);
    const [out, O] = this.#alloc(probs.shape);
    for (let i = 0; i < P.length; i++) O[i] = P[i] * scale;
    for (let r = 0; r < rows; r++) O[r * n + T[r]] = (P[r * n + T[r]] - 1) * scale;
    return out;
  }

  /** Row gather. */
  embedding(table: Tensor, ids: Tensor): Tensor {
    const C = table.shape[1];
    const I = data(ids);
    const Tb = data(table);
    const [out, O] = this.#alloc([...ids.shape, C]);
    for (let i = 0; i < I.length; i++) O.set(Tb.subarray(I[i] * C, I[i] * C + C), i * C);
    return out;
  }

  /** Scatter-add of `dy` rows into `dTable`. */
  embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void {
    const C = dTable.shape[1];
    const I = data(ids);
    const D = data(dTable), G = data(dy);
    for (let i = 0; i < I.length; i++) {
      const o = I[i] * C, g = i * C;
      for (let j = 0; j < C; j++) D[o + j] += G[g + j];
    }
  }

  /** AdamW with bias correction and decoupled weight decay. */
  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: B.AdamWParams): void {
    const P = data(param), G = data(grad), Mm = data(m), Vv = data(v);
    const { lr, beta1, beta2, eps, weightDecay, step } = hp;
    const bc1 = 1 - Math.pow(beta1, step), bc2 = 1 - Math.pow(beta2, step);
    for (let i = 0; i < P.length; i++) {
      const g = G[i];
      const mi = beta1 * Mm[i] + (1 - beta1) * g;
      const vi = beta2 * Vv[i] + (1 - beta2) * g * g;
      Mm[i] = mi;
      Vv[i] = vi;
      const p = P[i];
      P[i] = p - lr * ((mi / bc1) / (Math.sqrt(vi / bc2) + eps) + weightDecay * p);
    }
  }

  /** SGD with optional momentum buffer and L2 weight decay. */
  sgdInPlace(param: Tensor, grad: Tensor, buf: Tensor | null, hp: B.SGDParams): void {
    const P = data(param), G = data(grad);
    const { lr, momentum, weightDecay } = hp;
    if (buf === null) {
      for (let i = 0; i < P.length; i++) P[i] -= lr * (G[i] + weightDecay * P[i]);
      return;
    }
    const Bf = data(buf);
    for (let i = 0; i < P.length; i++) {
      // The stored (f32) buffer drives the step, as in the unfused update.
      Bf[i] = momentum * Bf[i] + (G[i] + weightDecay * P[i]);
      P[i] -= lr * Bf[i];
    }
  }

  /** Copy of rows `[start, end)` along dimension 0. */
  sliceRows(x: Tensor, start: number, end: number): Tensor {
    const inner = shapeSize(x.shape.slice(1));
    const shape = [end - start, ...x.shape.slice(1)];
    return this.#fromValues(shape, data(x).subarray(start * inner, end * inner));
  }

  /** Concatenation along dimension 0. */
  concatRows(parts: readonly Tensor[]): Tensor {
    const rest = parts[0].shape.slice(1);
    let rows = 0;
    for (const p of parts) rows += p.shape[0];
    const [out, O] = this.#alloc([rows, ...rest]);
    let off = 0;
    for (const p of parts) {
      O.set(data(p), off);
      off += p.size;
    }
    return out;
  }

  /** Axis permutation (a copy). */
  permute(x: Tensor, perm: readonly number[]): Tensor {
    const [out, O] = this.#alloc(perm.map((p) => x.shape[p]));
    permuteInto(data(x), x.shape, perm, O);
    return out;
  }
}
