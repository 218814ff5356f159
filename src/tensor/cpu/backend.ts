/**
 * The CPU backend, in two modes:
 *
 * - fast (the default): tensors live in one shared WebAssembly memory per
 *   backend, and matmul, the activations, softmax, layer norm, column sums
 *   and AdamW run as WebAssembly SIMD kernels (`kernels/wasm/`) on the
 *   backend's threads, summing in f32; the other ops run as JavaScript
 *   loops over the same memory, with no copy in or out;
 * - exact (`{ exact: true }`): Float32Array storage and plain loops that
 *   sum each product in f64, in order: the reference every fast kernel is
 *   tested against.
 *
 * Both are deterministic: the same inputs give the same bits, whatever
 * the thread count.
 *
 * @module
 */

import type * as B from "../backend.ts";
import { MemoryTracker } from "../_memory.ts";
import { rowCount } from "../_rows.ts";
import { checkFromData, checkZeros, firstInvalidIndex } from "../_validate.ts";
import { createTensor, shapeSize, type Tensor, tensorStorage } from "../tensor.ts";
import { dropoutBase, dropoutKey, dropoutScale, dropoutThreshold } from "../_dropout_hash.ts";
import { dropoutInto, type Operand, sumToShapeInto, whereInto } from "./_elementwise.ts";
import { embeddingBackwardInto, embeddingInto } from "./_layout.ts";
import { type CpuKernels, EXACT_KERNELS } from "./_kernels.ts";
import { ArrayPool } from "./_array_pool.ts";
import { checkCpuBackendOptions, type CpuBackendOptions } from "./backend_options.ts";
import {
  crossEntropyBackwardInto,
  crossEntropyInto,
  logSumExpInto,
  rmsNormBackwardInputInto,
  rmsNormBackwardWeight,
  rmsNormInto,
} from "./_rows.ts";
import { sgdInto } from "./_optimizers.ts";
import { bestWasmModule, wasmModule } from "./_wasm_module.ts";
import { WasmKernels } from "./_wasm_kernels.ts";

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

let noSimdNoticed = false;

/**
 * The CPU backend (see the module doc for its two modes). Kernels run
 * synchronously; `threads` of them at once in fast mode.
 *
 * Integer inputs (embedding ids, cross-entropy targets) are checked by the
 * ops before any kernel runs, through {@linkcode CpuBackend.invalidIndex}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend({ threads: 1 });
 * const a = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * assert.deepEqual(await ops.matmul(a, a).toArray(), new Float32Array([7, 10, 15, 22]));
 * const exact = new CpuBackend({ exact: true });
 * assert.equal(exact.exact, true);
 * be.close();
 * ```
 */
export class CpuBackend implements B.Backend {
  /** Always `"cpu"`. */
  readonly name: B.BackendName = "cpu";
  /** Human-readable description: the mode, the SIMD build and the threads. */
  readonly description: string;
  /** Whether this is the exact reference mode (f64 sums, JavaScript storage). */
  readonly exact: boolean;
  /** Threads a kernel runs on (1 in exact mode). */
  readonly threads: number;
  readonly #memory = new MemoryTracker();
  readonly #pool: ArrayPool | null;
  readonly #fast: WasmKernels | null;
  readonly #k: CpuKernels;
  #closed = false;

  /**
   * A CPU backend.
   *
   * @param options `exact`: the f64 reference mode (default false);
   * `threads`: threads per kernel in fast mode (default: every core,
   * `navigator.hardwareConcurrency`); `poolBytes`: bytes of disposed
   * tensors' storage kept idle for reuse (default 256 MiB); `simd`: the
   * build of the fast kernels (default the best this engine runs).
   * @throws {TypeError} When `options` is not an object, names an unknown
   * option, or an option has the wrong type.
   * @throws {RangeError} When `poolBytes` is not a non-negative integer or
   * `threads` not a positive integer.
   */
  constructor(options: CpuBackendOptions = {}) {
    const { poolBytes, exact, threads, simd } = checkCpuBackendOptions(options);
    const compiled = exact ? null : simd === undefined ? bestWasmModule() : wasmModule(simd);
    if (!exact && simd !== undefined && compiled === null) {
      throw new RangeError(
        `CpuBackend: this engine does not run the ${simd} build (simd: "${simd}")`,
      );
    }
    if (!exact && compiled === null && !noSimdNoticed) {
      noSimdNoticed = true;
      console.error(
        "conveyor: this engine runs no WebAssembly SIMD; the CPU backend uses its exact mode",
      );
    }
    if (compiled === null) {
      this.exact = true;
      this.threads = 1;
      this.#pool = new ArrayPool(poolBytes);
      this.#fast = null;
      this.#k = EXACT_KERNELS;
      this.description = "CPU exact reference (Float32Array, f64 sums)";
    } else {
      this.exact = false;
      this.threads = threads;
      this.#pool = null;
      this.#k = this.#fast = new WasmKernels(compiled, threads, poolBytes);
      this.#fast.watch(this);
      this.description = `CPU (WebAssembly ${
        compiled.variant === "relaxed" ? "relaxed SIMD" : "SIMD128"
      }, ${threads} thread${threads === 1 ? "" : "s"})`;
    }
  }

  /** Memory accounting of tensors created on this backend. */
  get memory(): B.MemoryStats {
    return this.#memory;
  }

  /**
   * Statistics of the pool behind the tensors' storage: a disposed
   * tensor's storage is kept (up to `poolBytes`) for the next tensor of its
   * size. In exact mode tensors of at most 16 values are neither kept nor
   * counted (V8 keeps such arrays on its own heap).
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { CpuBackend } from "@conveyor/core";
   * const be = new CpuBackend();
   * be.zeros([256, 256]).dispose();
   * const before = be.pool.created;
   * be.zeros([256, 256]).dispose(); // the first one's storage again
   * assert.equal(be.pool.created, before);
   * assert.equal(be.pool.reused, 1);
   * assert.ok(be.pool.idleBytes >= 256 * 256 * 4);
   * ```
   */
  get pool(): B.BufferPoolStats {
    return this.#pool?.stats ?? this.#fast!.heap.stats;
  }

  // Every tensor's storage comes from the pool (exact mode: `_array_pool.ts`)
  // or the heap (fast mode: `_wasm_heap.ts`): zeros unless `zero` is false,
  // when the caller overwrites every value.
  #alloc(shape: B.Shape, zero = true): [Tensor, Float32Array] {
    if (this.#closed) throw closedError();
    const n = shapeSize(shape);
    let buf: Float32Array;
    if (this.#pool !== null) buf = this.#pool.acquire(n, zero);
    else {
      const heap = this.#fast!.heap;
      buf = heap.f32(heap.alloc(4 * n, zero), n);
    }
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
    if (this.#closed || !(storage instanceof Float32Array)) return;
    if (this.#pool !== null) this.#pool.release(storage);
    else this.#fast!.heap.free(storage.byteOffset, storage.byteLength);
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
   * TypeError. The threads end; the pool's idle storage is dropped (the
   * memory goes to the garbage collector with the last tensor); disposing
   * tensors afterwards is harmless.
   */
  close(): void {
    this.#closed = true;
    this.#pool?.trim();
    this.#fast?.close();
  }

  // ---- kernels -------------------------------------------------------------

  /** Batched matrix product (see `Backend.matmul`). */
  matmul(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
    const ar = a.shape.length, br = b.shape.length;
    const M = transA ? a.shape[ar - 1] : a.shape[ar - 2];
    const K = transA ? a.shape[ar - 2] : a.shape[ar - 1];
    const N = transB ? b.shape[br - 2] : b.shape[br - 1];
    const batch = shapeSize(a.shape.slice(0, -2));
    const [out, C] = this.#alloc([...a.shape.slice(0, -2), M, N], false);
    this.#k.matmul(data(a), data(b), C, batch, M, K, N, transA, transB, br === 2);
    return out;
  }

  /** `x + bias` broadcast over rows. */
  addBias(x: Tensor, bias: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape, false);
    this.#k.addBias(data(x), data(bias), x.size / (x.cols || 1), x.cols, O);
    return out;
  }

  /** `s * x`. */
  scale(x: Tensor, s: number): Tensor {
    const [out, O] = this.#alloc(x.shape, false);
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
    const [out, O] = this.#alloc(x.shape, false);
    this.#k.unary(op, data(x), O);
    return out;
  }

  /** Unary input gradient from `v` (x or y) and `dy`. */
  unaryBackward(op: B.UnaryGradOp, v: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(v.shape, false);
    this.#k.unaryBackward(op, data(v), data(dy), O);
    return out;
  }

  /** `a (op) b` broadcast to `out`. */
  binary(op: B.BinaryOp, a: Tensor, b: Tensor, out: B.Shape): Tensor {
    const [t, O] = this.#alloc(out, false);
    this.#k.binary(op, operand(a), operand(b), out, O);
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
    const [out, O] = this.#alloc(x.shape, false);
    this.#k.softmax(data(x), rowCount(x), x.cols, causal, O);
    return out;
  }

  /** Softmax input gradient. */
  softmaxBackward(y: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(y.shape, false);
    this.#k.softmaxBackward(data(y), data(dy), rowCount(y), y.cols, O);
    return out;
  }

  /** Layer norm forward. */
  layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): B.LayerNormResult {
    const n = x.cols, rows = rowCount(x);
    const [y, Y] = this.#alloc(x.shape, false);
    const [mean, Mn] = this.#alloc([rows], false);
    const [rstd, Rs] = this.#alloc([rows], false);
    this.#k.layerNorm(data(x), data(gamma), data(beta), eps, rows, n, Y, Mn, Rs);
    return { y, mean, rstd };
  }

  /** Layer norm input gradient. */
  layerNormBackwardInput(dy: Tensor, x: Tensor, stats: B.LayerNormStats, gamma: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape, false);
    const [Mn, Rs] = [data(stats.mean), data(stats.rstd)];
    this.#k.layerNormBackwardInput(data(dy), data(x), Mn, Rs, data(gamma), rowCount(x), x.cols, O);
    return out;
  }

  /** Layer norm weight gradients. */
  layerNormBackwardWeight(
    dy: Tensor,
    x: Tensor,
    stats: B.LayerNormStats,
  ): { dgamma: Tensor; dbeta: Tensor } {
    const n = x.cols;
    const [dgamma, DG] = this.#alloc([n], false);
    const [dbeta, DB] = this.#alloc([n], false);
    const [Mn, Rs] = [data(stats.mean), data(stats.rstd)];
    this.#k.layerNormBackwardWeight(data(dy), data(x), Mn, Rs, rowCount(x), n, DG, DB);
    return { dgamma, dbeta };
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
    const [out, O] = this.#alloc([x.cols], false);
    this.#k.sumRows(data(x), rowCount(x), x.cols, O);
    return out;
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
    const [probs, P] = this.#alloc(logits.shape, false);
    const [loss, L] = this.#alloc([rows], false);
    crossEntropyInto(data(logits), data(targets), rows, n, P, L);
    return { loss, probs };
  }

  /** `(probs - onehot(targets)) * scale`. */
  crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor {
    const [out, O] = this.#alloc(probs.shape, false);
    crossEntropyBackwardInto(data(probs), data(targets), probs.cols, scale, O);
    return out;
  }

  /** Row gather. */
  embedding(table: Tensor, ids: Tensor): Tensor {
    const [out, O] = this.#alloc([...ids.shape, table.shape[1]], false);
    embeddingInto(data(table), data(ids), table.shape[1], O);
    return out;
  }

  /** Scatter-add of `dy` rows into `dTable`. */
  embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void {
    embeddingBackwardInto(data(dTable), data(ids), data(dy), dTable.shape[1]);
  }

  /** AdamW with bias correction and decoupled weight decay. */
  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: B.AdamWParams): void {
    this.#k.adamw(data(param), data(grad), data(m), data(v), hp);
  }

  /** SGD with optional momentum buffer and L2 weight decay. */
  sgdInPlace(param: Tensor, grad: Tensor, buf: Tensor | null, hp: B.SGDParams): void {
    sgdInto(data(param), data(grad), buf === null ? null : data(buf), hp);
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
    const [out, O] = this.#alloc(perm.map((p) => x.shape[p]), false);
    this.#k.permute(data(x), x.shape, perm, O);
    return out;
  }
}
