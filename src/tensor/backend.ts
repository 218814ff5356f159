/**
 * The contract every tensor backend implements.
 *
 * A backend owns storage (a `Float32Array` on the CPU, a `GPUBuffer` on
 * WebGPU) and runs kernels on it. Kernels receive tensors that the public op
 * functions in `ops.ts` have already validated (shapes, same backend, not
 * disposed), so a backend never re-checks its arguments: all user-facing
 * errors are raised once, in `ops.ts`, identically for every backend.
 *
 * Conventions shared by every kernel:
 * - All data is f32, row-major and contiguous. Integer data (token ids,
 *   class targets) is stored as f32 holding exact integers.
 * - "Rows" means the product of all dimensions but the last; "cols" the last
 *   dimension. Row-wise ops (softmax, layer norm, cross-entropy) work on
 *   each row independently.
 * - Kernels return fresh tensors unless their name ends in `InPlace`, in
 *   which case they overwrite their first argument and return nothing.
 * - GPU kernels are asynchronous: they enqueue work and return at once.
 *   Only `read` waits, and several reads may be in flight at once.
 *
 * @module
 */

import type { Tensor } from "./tensor.ts";
import type { BinaryOp, UnaryGradOp, UnaryOp } from "./_elementwise_ops.ts";

export type { BinaryOp, UnaryGradOp, UnaryOp };

/** Shape of a tensor: a list of non-negative integer dimensions. */
export type Shape = readonly number[];

/** The names of the built-in backends. */
export type BackendName = "cpu" | "webgpu";

/**
 * Statistics of a backend's storage pool, for tests and diagnostics: the
 * WebGPU backend's GPU buffers (`WebGPUBackend.pool`), the CPU backend's
 * Float32Arrays (`CpuBackend.pool`). Disposed tensors give their storage
 * back to the pool, and new tensors take it from there before allocating.
 *
 * @example
 * ```ts
 * import type { BufferPoolStats } from "@conveyor/core/tensor";
 * const s: BufferPoolStats = { allocatedBytes: 4096, idleBytes: 1024, created: 3, reused: 7 };
 * console.log(s.reused / (s.reused + s.created)); // share of allocations served by reuse
 * ```
 */
export interface BufferPoolStats {
  /**
   * Bytes of storage the pool has created and not given back: GPU buffers
   * not destroyed; on the CPU, arrays not dropped for the garbage collector
   * (storage of a tensor never disposed stays counted).
   */
  readonly allocatedBytes: number;
  /** Bytes of that storage idle in the pool right now (no tensor uses it). */
  readonly idleBytes: number;
  /** Buffers or arrays created so far. */
  readonly created: number;
  /** Allocations served from idle storage instead of new storage. */
  readonly reused: number;
}

/**
 * Memory accounting of one backend instance: bytes held by live tensors now,
 * and the most ever held at once since creation or the last `resetPeak`.
 *
 * @example
 * ```ts
 * import { createBackend } from "@conveyor/core/tensor";
 * const be = await createBackend("cpu");
 * be.memory.resetPeak();
 * console.log(be.memory.liveBytes, be.memory.peakBytes);
 * ```
 */
export interface MemoryStats {
  /** Bytes of tensor storage currently allocated and not disposed. */
  readonly liveBytes: number;
  /** Highest `liveBytes` seen since creation or the last `resetPeak()`. */
  readonly peakBytes: number;
  /** Sets `peakBytes` to the current `liveBytes`. */
  resetPeak(): void;
}

/** Hyper-parameters of one AdamW update (decoupled weight decay). */
export interface AdamWParams {
  /** Learning rate. */
  readonly lr: number;
  /** First-moment decay, e.g. 0.9. */
  readonly beta1: number;
  /** Second-moment decay, e.g. 0.999. */
  readonly beta2: number;
  /** Denominator epsilon, e.g. 1e-8. */
  readonly eps: number;
  /** Decoupled weight decay coefficient (multiplied by lr). */
  readonly weightDecay: number;
  /** 1-based step number, for bias correction. */
  readonly step: number;
}

/**
 * Hyper-parameters of one SGD update (as PyTorch's `SGD` without dampening
 * or Nesterov): `d = g + weightDecay·p`; with a momentum buffer
 * `buf ← momentum·buf + d` and `d = buf`; then `p ← p − lr·d`.
 */
export interface SGDParams {
  /** Learning rate. */
  readonly lr: number;
  /** Momentum μ in [0, 1); must be 0 when no momentum buffer is passed. */
  readonly momentum: number;
  /** L2 weight decay λ, added to the gradient. */
  readonly weightDecay: number;
}

/**
 * The per-row statistics of a layer norm forward, which its gradients need
 * (a {@linkcode LayerNormResult} is one).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, type LayerNormStats, ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const stats: LayerNormStats = ops.layerNorm(x, ops.ones(be, [2]), be.zeros([2]));
 * assert.deepEqual(await stats.mean.toArray(), new Float32Array([2]));
 * ```
 */
export interface LayerNormStats {
  /** Row means, shape `[rows]`. */
  readonly mean: Tensor;
  /** Row reciprocal standard deviations 1/sqrt(var + eps), shape `[rows]`. */
  readonly rstd: Tensor;
}

/** Result of a layer norm forward: the output and the per-row statistics. */
export interface LayerNormResult extends LayerNormStats {
  /** Normalised, scaled and shifted output, same shape as the input. */
  readonly y: Tensor;
}

/**
 * Result of an RMS norm forward: the output and the per-row statistic.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops, type RmsNormResult } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const r: RmsNormResult = ops.rmsNorm(ops.ones(be, [3, 2]), ops.ones(be, [2]));
 * assert.deepEqual(r.rstd.shape, [3]); // one per row
 * ```
 */
export interface RmsNormResult {
  /** Normalised and scaled output, same shape as the input. */
  readonly y: Tensor;
  /** Row reciprocal RMS 1/sqrt(mean(x²) + eps), shape `[rows]`. */
  readonly rstd: Tensor;
}

/**
 * The first invalid entry of an integer tensor (ids, class targets).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * const be = new CpuBackend();
 * const ids = be.fromData(new Float32Array([0, 2, 7]), [3]);
 * assert.deepEqual(be.invalidIndex(ids, 5), { index: 2, value: 7 });
 * ```
 */
export interface InvalidIndex {
  /** Flat position of the entry. */
  readonly index: number;
  /** Its value (not an integer in the valid range). */
  readonly value: number;
}

/** Result of softmax cross-entropy forward. */
export interface CrossEntropyResult {
  /** Per-row loss -log softmax(logits)[target], shape `[rows]`. */
  readonly loss: Tensor;
  /** Row softmax of the logits, shape `[rows, classes]`, kept for backward. */
  readonly probs: Tensor;
}

/**
 * A tensor backend: storage plus kernels.
 *
 * A backend owns storage (a `Float32Array` on the CPU, a `GPUBuffer` on
 * WebGPU) and runs kernels on it. Kernels receive tensors that the public op
 * functions in `ops.ts` have already validated (shapes, same backend, not
 * disposed), so a backend never re-checks its arguments: all user-facing
 * errors are raised once, in `ops.ts`, identically for every backend.
 *
 * Conventions shared by every kernel:
 * - All data is f32, row-major and contiguous. Integer data (token ids,
 *   class targets) is stored as f32 holding exact integers.
 * - "Rows" means the product of all dimensions but the last; "cols" the last
 *   dimension. Row-wise ops (softmax, layer norm, cross-entropy) work on
 *   each row independently.
 * - Kernels return fresh tensors unless their name ends in `InPlace`, in
 *   which case they overwrite their first argument and return nothing.
 * - GPU kernels are asynchronous: they enqueue work and return at once.
 *   Only `read` waits, and several reads may be in flight at once.
 */
export interface Backend {
  /** Which implementation this is. */
  readonly name: BackendName;
  /** Human-readable description, e.g. the GPU adapter's name. */
  readonly description: string;
  /** Memory accounting for tensors created on this backend. */
  readonly memory: MemoryStats;

  // ---- storage -----------------------------------------------------------
  /** Creates a tensor holding a copy of `data` (length = product of shape). */
  fromData(data: Float32Array, shape: Shape): Tensor;
  /** Creates a tensor of zeros. */
  zeros(shape: Shape): Tensor;
  /** Copies a tensor's contents out. Waits for pending work on it. */
  read(t: Tensor): Promise<Float32Array>;
  /**
   * Copies a tensor's contents out within the call where the backend can:
   * always on the CPU, whose data lives in host memory; on WebGPU where the
   * device's read-backs complete when issued (Deno). Null (or absent) where
   * the data comes back only through `read`.
   */
  readSync?(t: Tensor): Float32Array | null;
  /** Releases the storage behind a tensor (called by `Tensor.dispose`). */
  release(storage: unknown, bytes: number): void;
  /** Submits queued GPU work now (a no-op on the CPU). */
  flush(): void;
  /** Waits until all submitted work has completed. */
  sync(): Promise<void>;
  /**
   * A point in the device's work after everything recorded so far: resolves
   * to the device's timestamp (ms) when it reached it; undefined where that
   * cannot be dated (the CPU, whose work is done when the call returns, or a
   * device without timestamps).
   */
  timeMark?(): Promise<number> | undefined;
  /** Host time (`performance.now()`) minus the device's timestamps, ms (NaN before any mark). */
  hostMinusDevice?(): number;
  /** True once {@linkcode Backend.close} has been called. */
  readonly closed: boolean;
  /**
   * Releases every resource of the backend and refuses every later op,
   * `fromData`, `read` or `sync` with a TypeError (disposing tensors stays
   * harmless). On the CPU, which holds nothing but garbage-collected arrays,
   * it only marks the backend closed and returns at once; on WebGPU it waits
   * for the queued work, releases the device and its buffer pools and
   * resolves once the device is lost, throwing after the release an error
   * that the waited-for work reported. Idempotent.
   */
  close(): void | Promise<void>;

  // ---- kernels (arguments already validated by ops.ts) --------------------
  /**
   * Batched matrix product. `a` is `[...batch, M, K]` (or `[...batch, K, M]`
   * when `transA`), `b` is `[...batch, K, N]` (or `[...batch, N, K]` when
   * `transB`); `b` may also be 2-D and is then shared by every batch entry.
   * Result `[...batch, M, N]`.
   */
  matmul(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor;
  /**
   * The first entry of `ids` that is not an integer in [0, n), null when
   * there is none, or undefined when the backend cannot tell without a
   * device round trip (then the kernels that use `ids` check them on the
   * device and report through the next `read` or `sync`).
   */
  invalidIndex(ids: Tensor, n: number): InvalidIndex | null | undefined;
  /** A tensor of `shape` with every element `value` (any number, NaN and ±∞ included). */
  full(shape: Shape, value: number): Tensor;

  /** Elementwise unary op; a NaN element gives NaN. */
  unary(op: UnaryOp, x: Tensor): Tensor;
  /**
   * Input gradient `dy · f'` of a unary op from `v` (the forward input for
   * relu, gelu and silu, the output for tanh and sigmoid); NaN in either
   * operand gives NaN.
   */
  unaryBackward(op: UnaryGradOp, v: Tensor, dy: Tensor): Tensor;
  /**
   * Elementwise `a (op) b` with both operands broadcast (NumPy rules) to
   * `out`, their broadcast shape; NaN in either operand gives NaN.
   */
  binary(op: BinaryOp, a: Tensor, b: Tensor, out: Shape): Tensor;
  /** `cond ≠ 0 ? a : b` (a NaN `cond` counts as true), all broadcast to `out`. */
  where(cond: Tensor, a: Tensor, b: Tensor, out: Shape): Tensor;
  /**
   * Sum of `x` over the axes where `shape` (right-aligned, broadcastable to
   * `x.shape`) has extent 1, giving a tensor of `shape`: the gradient of a
   * broadcast operand.
   */
  sumToShape(x: Tensor, shape: Shape): Tensor;
  /**
   * Dropout with the counter-based mask of `seed`, `step` and the global
   * index of each element (`rowOffset` rows of `x.shape[1..]` precede this
   * micro-batch): kept elements scaled by `1 / (1 - p)`, dropped ones 0.
   */
  dropout(x: Tensor, p: number, seed: number, step: number, rowOffset: number): Tensor;

  /** `x + bias` with `bias` of shape `[cols]` broadcast over every row. */
  addBias(x: Tensor, bias: Tensor): Tensor;
  /** `s * x`. */
  scale(x: Tensor, s: number): Tensor;
  /** In place: `y += alpha * x` (same shapes). */
  axpyInPlace(y: Tensor, alpha: number, x: Tensor): void;
  /** In place: every element of `x` becomes `value`. */
  fillInPlace(x: Tensor, value: number): void;
  /** A fresh copy of `x`. */
  copy(x: Tensor): Tensor;
  /** In place: `dst` becomes a copy of `src` (same shapes, distinct storage). */
  copyInPlace(dst: Tensor, src: Tensor): void;
  /** In place: `x ← s * x`. */
  scaleInPlace(x: Tensor, s: number): void;

  /**
   * Softmax over the last dimension. With `causal`, `x` is `[..., T, T]` and
   * entry `j` of row `i` (i = row index mod T) is masked out when `j > i`
   * (its probability is exactly 0).
   */
  softmax(x: Tensor, causal: boolean): Tensor;
  /** Softmax input gradient: `y * (dy - sum(dy * y, row))`. */
  softmaxBackward(y: Tensor, dy: Tensor): Tensor;

  /** Layer norm over the last dimension with `gamma`, `beta` of shape `[cols]`. */
  layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): LayerNormResult;
  /** Layer norm input gradient (the I pass), from the forward's input and statistics. */
  layerNormBackwardInput(dy: Tensor, x: Tensor, stats: LayerNormStats, gamma: Tensor): Tensor;
  /**
   * Layer norm weight gradients (the W pass): `dgamma = Σ_rows dy·x̂` and
   * `dbeta = Σ_rows dy`, each of shape `[cols]`.
   */
  layerNormBackwardWeight(
    dy: Tensor,
    x: Tensor,
    stats: LayerNormStats,
  ): { dgamma: Tensor; dbeta: Tensor };

  /** RMS norm over the last dimension with `weight` of shape `[cols]`. */
  rmsNorm(x: Tensor, weight: Tensor, eps: number): RmsNormResult;
  /** RMS norm input gradient (the I pass). */
  rmsNormBackwardInput(dy: Tensor, x: Tensor, rstd: Tensor, weight: Tensor): Tensor;
  /** RMS norm weight gradient (the W pass): `Σ_rows dy · x · rstd`, shape `[cols]`. */
  rmsNormBackwardWeight(dy: Tensor, x: Tensor, rstd: Tensor): Tensor;
  /**
   * `log Σ exp` over the last dimension (stable), shape `x.shape` without
   * its last dimension; NaN for a row holding NaN.
   */
  logSumExp(x: Tensor): Tensor;

  /** Sum over all rows: `[..., N]` → `[N]` (bias gradients). */
  sumRows(x: Tensor): Tensor;
  /** Sum of all elements, shape `[1]`. */
  sum(x: Tensor): Tensor;
  /** Sum of squares of all elements, shape `[1]` (global-norm clipping). */
  sumSquares(x: Tensor): Tensor;

  /**
   * Softmax cross-entropy of `logits` `[rows, classes]` against integer
   * `targets` `[rows]`.
   */
  crossEntropy(logits: Tensor, targets: Tensor): CrossEntropyResult;
  /** `(probs - onehot(targets)) * scale`, shape `[rows, classes]`. */
  crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor;

  /** Row gather: `table` `[V, C]`, integer `ids` of any shape → `[...ids.shape, C]`. */
  embedding(table: Tensor, ids: Tensor): Tensor;
  /** In place: `dTable[ids[i]] += dy[i]` for every position i (scatter-add). */
  embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void;

  /** In place AdamW update of `param`, with moments `m` and `v` updated too. */
  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWParams): void;
  /**
   * In place SGD update of `param` (see {@linkcode SGDParams}); `buf`, when
   * given, is the momentum buffer and is updated too.
   */
  sgdInPlace(param: Tensor, grad: Tensor, buf: Tensor | null, hp: SGDParams): void;

  /** Copy of rows `[start, end)` along dimension 0. */
  sliceRows(x: Tensor, start: number, end: number): Tensor;
  /** Concatenation along dimension 0 (all other dimensions equal). */
  concatRows(parts: readonly Tensor[]): Tensor;
  /** Axis permutation (a copy): output dimension i is input dimension `perm[i]`. */
  permute(x: Tensor, perm: readonly number[]): Tensor;
}
