/**
 * The public `WebGPUBackend`: opens a device and implements the `Backend`
 * contract by handing each kernel to its family's glue:
 *
 * | family                                   | glue              | kernels                         |
 * | ---------------------------------------- | ----------------- | ------------------------------- |
 * | submission, uniforms, pipelines, buffers | `_device.ts`      | —                               |
 * | matmul (tuning and dispatch)             | `_matmul.ts`      | `matmul*.wgsl`                  |
 * | binary ops, where, bias, scale, dropout  | `_elementwise.ts` | `binary.wgsl`, `where.wgsl`, …  |
 * | unary ops and their gradients            | `_unary.ts`       | `unary*.wgsl`                   |
 * | softmax, layer / RMS norm, log-sum-exp   | `_rows.ts`        | `softmax*`, `*_norm*`, …        |
 * | column sums, sums, sums to a shape       | `_reductions.ts`  | `sum_rows.wgsl`, `reduce.wgsl`  |
 * | cross-entropy                            | `_losses.ts`      | `cross_entropy*.wgsl`           |
 * | embedding gather and scatter-add         | `_embedding.ts`   | `embedding*.wgsl`               |
 * | AdamW, SGD                               | `_optimizers.ts`  | `adamw.wgsl`, `sgd.wgsl`        |
 * | copies, slices, permute, strided copies  | `_layout.ts`      | `permute.wgsl`, `copy2d.wgsl`   |
 *
 * Kernel sources, their bindings, named `Params` fields and op codes are
 * declared in `_kernels.ts`.
 *
 * @module
 */

import { checkOptionsObject } from "../../text/nearest.ts";
import type * as B from "../backend.ts";
import { checkFromData, checkZeros } from "../_validate.ts";
import type { Tensor } from "../tensor.ts";
import { buf, DeviceCore } from "./_device.ts";
import * as ew from "./_elementwise.ts";
import * as emb from "./_embedding.ts";
import { invalidIndex } from "./_index_check.ts";
import * as layout from "./_layout.ts";
import * as losses from "./_losses.ts";
import { MatmulEngine } from "./_matmul.ts";
import {
  adapterKey,
  isCpuAdapter,
  type MatmulConfig,
  type MatmulTuneResult,
} from "./_matmul_config.ts";
import * as opt from "./_optimizers.ts";
import type { BufferPoolStats } from "./_pool.ts";
import { reduce, sumRows, sumToShape } from "./_reductions.ts";
import * as rows from "./_rows.ts";
import { unary, unaryBackward } from "./_unary.ts";

export type { BufferPoolStats, MatmulConfig, MatmulTuneResult };

/**
 * Options of `WebGPUBackend.create` (and of `createBackend` when it picks
 * WebGPU).
 *
 * @example
 * ```ts
 * import type { WebGPUBackendOptions } from "@conveyor/core/tensor";
 * // Skip the matmul timing at start-up, e.g. in short-lived scripts.
 * const opts: WebGPUBackendOptions = { matmul: "default" };
 * console.log(opts.matmul);
 * ```
 */
export interface WebGPUBackendOptions {
  /** Adapter to use; by default `navigator.gpu.requestAdapter()`. */
  readonly adapter?: GPUAdapter;
  /** Passed to `requestAdapter` when no adapter is given. */
  readonly powerPreference?: GPUPowerPreference;
  /**
   * Matmul kernel choice: `"auto"` (default) times candidates on first use
   * of this kind of adapter and caches the winner; `"default"` takes the
   * untimed default for the adapter class; or a fixed variant.
   */
  readonly matmul?: "auto" | "default" | MatmulConfig;
  /**
   * With `matmul: "auto"`: the large-matmul variant already tuned for this
   * adapter (`matmulConfig` of a backend tuned elsewhere, e.g. on the main
   * thread for workers, which have no tuning cache), taken as the tuning's
   * result instead of timing the candidates again. Smaller matmuls keep the
   * quick-to-compile default, as after a tuning.
   */
  readonly tunedMatmul?: MatmulConfig;
  /** Workgroup size of the row-wise kernels (softmax, layer norm, ...). */
  readonly rowWorkgroupSize?: number;
  /** Dispatches recorded before a batch is submitted (default 256). */
  readonly maxDispatchesPerSubmit?: number;
  /**
   * Embedding weight-gradient kernel: `"auto"` (default) picks by size;
   * `"sort"` sorts the ids and adds each id's rows (O(N·C) after an
   * O(N log² N) sort); `"scan"` scans every id for every table entry
   * (O(V·C·N), one dispatch). Both add in position order and equal the CPU
   * bit for bit; for benchmarks and tests.
   */
  readonly embeddingBackward?: "auto" | "scan" | "sort";
  /**
   * How read-backs complete: `"auto"` (default) detects once whether the
   * data is there as soon as the map is issued (Deno 2.9, whose map promise
   * settles only after a fixed 10 ms sleep) and then reads without awaiting
   * the promise; `"awaited"` always awaits it (the plain WebGPU way; for
   * comparisons and tests).
   */
  readonly readPath?: "auto" | "awaited";
  /**
   * Whether GPU sorts (the sorted embedding backward) do their short
   * distances in workgroup memory: default true on GPUs, false on CPU
   * adapters such as llvmpipe, where workgroup barriers are slow.
   */
  readonly sortInWorkgroupMemory?: boolean;
}

/**
 * The WebGPU backend. Create it with `WebGPUBackend.create()` (or
 * `createBackend("webgpu")`); tensors then live in GPU buffers and kernels
 * run as WGSL compute shaders.
 *
 * Integer inputs (embedding ids, cross-entropy targets) out of range are a
 * RangeError as on the CPU, thrown before any work when they came from host
 * data, and by the next `read()` or `sync()` when they were computed on the
 * device (see `_index_check.ts`).
 *
 * @example
 * ```ts
 * import { createBackend, ops } from "@conveyor/core/tensor";
 * // "auto" picks WebGPU when an adapter exists; the example stays on the CPU.
 * const be = await createBackend("cpu");
 * const a = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * console.log(await ops.matmul(a, a).toArray()); // Float32Array [7, 10, 15, 22]
 * ```
 */
export class WebGPUBackend implements B.Backend {
  /** Always `"webgpu"`. */
  readonly name: B.BackendName = "webgpu";
  /** The adapter's description. */
  readonly description: string;
  /** The device all tensors of this backend live on. */
  readonly device: GPUDevice;
  /** Whether the adapter runs shaders on the CPU (llvmpipe and the like). */
  readonly cpuAdapter: boolean;

  readonly #core: DeviceCore;
  readonly #matmul: MatmulEngine;
  #closing: Promise<void> | null = null;

  private constructor(device: GPUDevice, info: GPUAdapterInfo, opts: WebGPUBackendOptions) {
    this.device = device;
    this.cpuAdapter = isCpuAdapter(info);
    this.description = `WebGPU: ${info.description || info.vendor || "unknown adapter"}`;
    this.#core = new DeviceCore(device, this.cpuAdapter, this, opts);
    this.#matmul = new MatmulEngine(this.#core, adapterKey(info));
  }

  /**
   * Opens the default (or given) adapter and device and readies the backend.
   * Throws an Error naming the cause when there is no WebGPU or no adapter.
   */
  static async create(opts: WebGPUBackendOptions = {}): Promise<WebGPUBackend> {
    checkOptionsObject(opts, [
      "adapter",
      "powerPreference",
      "matmul",
      "tunedMatmul",
      "rowWorkgroupSize",
      "maxDispatchesPerSubmit",
      "embeddingBackward",
      "readPath",
      "sortInWorkgroupMemory",
    ], "WebGPUBackend.create: ");
    let adapter = opts.adapter ?? null;
    if (adapter === null) {
      const gpu = (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu;
      if (gpu === undefined) {
        throw new Error("WebGPU unavailable: navigator.gpu is undefined, so there is no adapter");
      }
      adapter = await gpu.requestAdapter({ powerPreference: opts.powerPreference });
      if (adapter === null) {
        throw new Error("WebGPU unavailable: requestAdapter() found no adapter");
      }
    }
    const l = adapter.limits;
    // Timestamps date each action's device work (see timeMark); optional.
    const features: GPUFeatureName[] = adapter.features.has("timestamp-query")
      ? ["timestamp-query"]
      : [];
    const device = await adapter.requestDevice({
      requiredFeatures: features,
      requiredLimits: {
        maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
        maxBufferSize: l.maxBufferSize,
        maxStorageBuffersPerShaderStage: Math.min(l.maxStorageBuffersPerShaderStage, 8),
        maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
        maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
        maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
        maxComputeWorkgroupSizeY: l.maxComputeWorkgroupSizeY,
      },
    });
    const be = new WebGPUBackend(device, adapter.info, opts);
    const choice = opts.matmul ?? "auto";
    const tuned = opts.tunedMatmul;
    if (choice === "auto" && tuned !== undefined) {
      try {
        be.#matmul.useTuned(tuned);
      } catch (e) {
        be.#core.destroy();
        throw e;
      }
    } else if (choice === "auto") {
      if (!be.#matmul.useCached()) await be.tuneMatmul();
    } else if (choice !== "default") {
      be.setMatmulConfig(choice);
    }
    return be;
  }

  // ---- introspection --------------------------------------------------------

  /** Memory accounting of tensors created on this backend. */
  get memory(): B.MemoryStats {
    return this.#core.memory;
  }

  /** Statistics of the GPU buffer pool behind the tensors. */
  get pool(): BufferPoolStats {
    return this.#core.pool.stats;
  }

  /**
   * The matmul kernel variant for large problems (at least 2^18 outputs):
   * the tuned one. Smaller matmuls use a variant that is quick to compile,
   * unless `setMatmulConfig` pinned one variant for all sizes.
   */
  get matmulConfig(): MatmulConfig {
    return this.#matmul.config;
  }

  /** Timings of the last `tuneMatmul` on this backend, fastest first. */
  get tuneResults(): readonly MatmulTuneResult[] {
    return this.#matmul.tuneResults;
  }

  /**
   * Uses `config` for every later matmul of any size (validated against the
   * device limits); for tests, benchmarks and known-good devices.
   */
  setMatmulConfig(config: MatmulConfig): void {
    this.#core.live();
    this.#matmul.pin(config);
  }

  /**
   * Times the candidate matmul variants for this adapter on a mid-size
   * problem (512³), selects the fastest for large matmuls, caches the choice
   * for this adapter and returns all timings.
   */
  tuneMatmul(): Promise<readonly MatmulTuneResult[]> {
    this.#core.live();
    return this.#matmul.tune(this.description);
  }

  // ---- storage ---------------------------------------------------------------

  /** Creates a tensor holding a copy of `data`. */
  fromData(data: Float32Array, shape: B.Shape): Tensor {
    this.#core.live();
    checkFromData(data, shape);
    return this.#core.upload(data, shape);
  }

  /** Creates a tensor of zeros. */
  zeros(shape: B.Shape): Tensor {
    this.#core.live();
    checkZeros(shape);
    const t = this.#core.newTensor(shape);
    this.#core.clear(buf(t), t.size);
    return t;
  }

  /** A tensor with every element `value` (one fill). */
  full(shape: B.Shape, value: number): Tensor {
    this.#core.live();
    checkZeros(shape);
    return ew.full(this.#core, shape, value);
  }

  /**
   * The first entry of `ids` that is not an integer in [0, n), or null; or
   * undefined when `ids` has no host record to check (see `_index_check.ts`).
   */
  invalidIndex(ids: Tensor, n: number): B.InvalidIndex | null | undefined {
    return invalidIndex(this.#c(), ids, n);
  }

  /** Copies a tensor's contents out once the work queued before it is done. */
  read(t: Tensor): Promise<Float32Array> {
    return this.#core.read(t);
  }

  /**
   * Copies a tensor's contents out within this call (blocking until the
   * device has done the work queued before) where {@linkcode WebGPUBackend.readPath}
   * is `"immediate"`; null where the data comes back only through `read`.
   */
  readSync(t: Tensor): Float32Array | null {
    return this.#core.readSync(t);
  }

  /**
   * How read-backs complete: `"immediate"` where the data is there once the
   * map is issued (Deno 2.9, whose map promise settles after a fixed 10 ms
   * sleep), else `"awaited"`. Detected at creation; a read whose data is
   * not there after all still awaits the promise.
   */
  get readPath(): "immediate" | "awaited" {
    return this.#core.readPath;
  }

  /** Releases storage (called by `Tensor.dispose`). */
  release(storage: unknown, bytes: number): void {
    this.#core.release(storage, bytes);
  }

  /** Submits the recorded work now. */
  flush(): void {
    this.#core.flush();
  }

  /**
   * A point in the device's work after everything recorded so far: resolves
   * to the device's timestamp (ms) when it reached it, once a later `read`,
   * `readSync` or `sync` has waited for the device past it (a mark never
   * waits on its own); undefined where the adapter has no "timestamp-query"
   * feature. See {@linkcode WebGPUBackend.hostMinusDevice} for host time.
   */
  timeMark(): Promise<number> | undefined {
    return this.#core.mark();
  }

  /** Host time (`performance.now()`) minus device time, ms, as estimated from the marks read so far (NaN before any). */
  hostMinusDevice(): number {
    return this.#core.hostMinusDevice;
  }

  /** Submits the recorded work and waits until the GPU has finished it (a fence through the read path). */
  sync(): Promise<void> {
    return this.#core.sync();
  }

  /** True once `close()` has been called: every later op throws a TypeError. */
  get closed(): boolean {
    return this.#core.closed;
  }

  /**
   * Refuses every later op at once (a TypeError), waits for the work already
   * queued, then releases the device and every buffer; resolves once the
   * device is lost. An error that the waited-for work reported (such as an
   * index out of range found on the device) is thrown after the release.
   * Disposing tensors afterwards is harmless. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#core.close();
    return this.#closing;
  }

  /** The core, after checking the backend is alive. */
  #c(): DeviceCore {
    this.#core.live();
    return this.#core;
  }

  // ---- kernels: matmul and elementwise (_matmul.ts, _elementwise.ts) ---------------

  /** Batched matrix product (see `Backend.matmul`). */
  matmul(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
    this.#core.live();
    return this.#matmul.matmul(a, b, transA, transB);
  }

  /** `a (op) b` broadcast to `out`. */
  binary(op: B.BinaryOp, a: Tensor, b: Tensor, out: B.Shape): Tensor {
    return ew.binary(this.#c(), op, a, b, out);
  }

  /** `cond ≠ 0 ? a : b` broadcast to `out`. */
  where(cond: Tensor, a: Tensor, b: Tensor, out: B.Shape): Tensor {
    return ew.where(this.#c(), cond, a, b, out);
  }

  /** Dropout with the counter-based mask. */
  dropout(x: Tensor, p: number, seed: number, step: number, rowOffset: number): Tensor {
    return ew.dropout(this.#c(), x, p, seed, step, rowOffset);
  }

  /** `x + bias` broadcast over rows. */
  addBias(x: Tensor, bias: Tensor): Tensor {
    return ew.addBias(this.#c(), x, bias);
  }

  /** `s * x`. */
  scale(x: Tensor, s: number): Tensor {
    return ew.scale(this.#c(), x, s);
  }

  /** In place `y += alpha * x`. */
  axpyInPlace(y: Tensor, alpha: number, x: Tensor): void {
    ew.axpyInPlace(this.#c(), y, alpha, x);
  }

  /** In place fill. */
  fillInPlace(x: Tensor, value: number): void {
    ew.fillInPlace(this.#c(), x, value);
  }

  /** A fresh copy. */
  copy(x: Tensor): Tensor {
    return layout.copy(this.#c(), x);
  }

  /** In place `dst ← src`: one buffer-to-buffer copy, no dispatch. */
  copyInPlace(dst: Tensor, src: Tensor): void {
    layout.copyInPlace(this.#c(), dst, src);
  }

  /** In place `x ← s * x`. */
  scaleInPlace(x: Tensor, s: number): void {
    ew.scaleInPlace(this.#c(), x, s);
  }

  // ---- kernels: unary ops (_unary.ts) ------------------------------------------

  /** Elementwise unary op; NaN kept. */
  unary(op: B.UnaryOp, x: Tensor): Tensor {
    return unary(this.#c(), op, x);
  }

  /** Unary input gradient from `v` (x or y) and `dy`. */
  unaryBackward(op: B.UnaryGradOp, v: Tensor, dy: Tensor): Tensor {
    return unaryBackward(this.#c(), op, v, dy);
  }

  // ---- kernels: row-wise and reductions (_rows.ts, _reductions.ts) -----------------

  /** Row softmax, optionally causal. */
  softmax(x: Tensor, causal: boolean): Tensor {
    return rows.softmax(this.#c(), x, causal);
  }

  /** Softmax input gradient. */
  softmaxBackward(y: Tensor, dy: Tensor): Tensor {
    return rows.softmaxBackward(this.#c(), y, dy);
  }

  /** Layer norm forward. */
  layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): B.LayerNormResult {
    return rows.layerNorm(this.#c(), x, gamma, beta, eps);
  }

  /** Layer norm input gradient. */
  layerNormBackwardInput(dy: Tensor, x: Tensor, stats: B.LayerNormStats, gamma: Tensor): Tensor {
    return rows.layerNormBackwardInput(this.#c(), dy, x, stats, gamma);
  }

  /** Layer norm weight gradients. */
  layerNormBackwardWeight(
    dy: Tensor,
    x: Tensor,
    stats: B.LayerNormStats,
  ): { dgamma: Tensor; dbeta: Tensor } {
    return rows.layerNormBackwardWeight(this.#c(), dy, x, stats);
  }

  /** RMS norm forward. */
  rmsNorm(x: Tensor, weight: Tensor, eps: number): B.RmsNormResult {
    return rows.rmsNorm(this.#c(), x, weight, eps);
  }

  /** RMS norm input gradient. */
  rmsNormBackwardInput(dy: Tensor, x: Tensor, rstd: Tensor, weight: Tensor): Tensor {
    return rows.rmsNormBackwardInput(this.#c(), dy, x, rstd, weight);
  }

  /** RMS norm weight gradient. */
  rmsNormBackwardWeight(dy: Tensor, x: Tensor, rstd: Tensor): Tensor {
    return rows.rmsNormBackwardWeight(this.#c(), dy, x, rstd);
  }

  /** Row-wise log Σ exp. */
  logSumExp(x: Tensor): Tensor {
    return rows.logSumExp(this.#c(), x);
  }

  /** Sum over the axes where `shape` has extent 1. */
  sumToShape(x: Tensor, shape: B.Shape): Tensor {
    return sumToShape(this.#c(), x, shape);
  }

  /** Column sums `[..., N]` → `[N]`. */
  sumRows(x: Tensor): Tensor {
    return sumRows(this.#c(), x);
  }

  /** Sum of all elements, `[1]`. */
  sum(x: Tensor): Tensor {
    return reduce(this.#c(), x, false);
  }

  /** Sum of squares, `[1]`. */
  sumSquares(x: Tensor): Tensor {
    return reduce(this.#c(), x, true);
  }

  // ---- kernels: losses, embedding, optimizers ----------------------------------------

  /** Softmax cross-entropy forward. */
  crossEntropy(logits: Tensor, targets: Tensor): B.CrossEntropyResult {
    return losses.crossEntropy(this.#c(), logits, targets);
  }

  /** `(probs - onehot(targets)) * scale`. */
  crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor {
    return losses.crossEntropyBackward(this.#c(), probs, targets, scale);
  }

  /** Row gather. */
  embedding(table: Tensor, ids: Tensor): Tensor {
    return emb.embedding(this.#c(), table, ids);
  }

  /** Scatter-add of `dy` rows into `dTable`. */
  embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void {
    emb.embeddingBackwardInPlace(this.#c(), dTable, ids, dy);
  }

  /** AdamW with bias correction and decoupled weight decay. */
  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: B.AdamWParams): void {
    opt.adamwInPlace(this.#c(), param, grad, m, v, hp);
  }

  /** SGD with optional momentum buffer and L2 weight decay, in one pass. */
  sgdInPlace(param: Tensor, grad: Tensor, buffer: Tensor | null, hp: B.SGDParams): void {
    opt.sgdInPlace(this.#c(), param, grad, buffer, hp);
  }

  // ---- kernels: layout (_layout.ts) ---------------------------------------------------

  /** Copy of rows `[start, end)` along dimension 0. */
  sliceRows(x: Tensor, start: number, end: number): Tensor {
    return layout.sliceRows(this.#c(), x, start, end);
  }

  /** Concatenation along dimension 0. */
  concatRows(parts: readonly Tensor[]): Tensor {
    return layout.concatRows(this.#c(), parts);
  }

  /** Axis permutation (a copy). */
  permute(x: Tensor, perm: readonly number[]): Tensor {
    return layout.permute(this.#c(), x, perm);
  }
}
