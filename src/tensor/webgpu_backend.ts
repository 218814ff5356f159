/**
 * The WebGPU backend: tensors in GPU buffers, kernels in `kernels/*.wgsl`.
 *
 * Designed for throughput on a queue that is slow to round-trip:
 * - Kernels only record work. Dispatches go into one command encoder (one
 *   compute pass where possible) and are submitted in batches: by `flush()`,
 *   when a batch is full, by `read()`, and at the latest in a microtask after
 *   the synchronous code that recorded them, so the GPU never idles on
 *   unsubmitted work. Only `read()` (`await t.toArray()`) waits, and several
 *   reads may be in flight at once; each `mapAsync` has a floor of about
 *   10 ms on some adapters but overlaps JS work and other reads.
 * - Pipelines are compiled once per device and kernel variant; bind groups
 *   are built per dispatch; sizes travel in a per-batch uniform arena.
 * - Buffers come from a size-bucketed pool; see `_webgpu_pool.ts` for when a
 *   released buffer may be reused.
 * - Matmul picks its kernel variant per device by timing a few candidates
 *   the first time the device is used (see `_webgpu_matmul.ts`).
 *
 * @module
 */

import type {
  AdamWParams,
  Backend,
  BackendName,
  CrossEntropyResult,
  LayerNormResult,
  MemoryStats,
  SGDParams,
  Shape,
} from "./backend.ts";
import { MemoryTracker } from "./_memory.ts";
import { rowCount } from "./_rows.ts";
import { checkFromData, checkZeros, fmtShape } from "./_validate.ts";
import { shapeSize, Tensor } from "./tensor.ts";
import { KERNELS, type KernelSource } from "./_webgpu_kernels.ts";
import { type ShaderDefines, specialize } from "./_webgpu_shader.ts";
import { BufferPool, type BufferPoolStats } from "./_webgpu_pool.ts";
import {
  adapterKey,
  cachedConfig,
  candidateConfigs,
  checkConfig,
  configDefines,
  defaultConfig,
  isCpuAdapter,
  LARGE_MATMUL_OUTPUTS,
  type MatmulConfig,
  type MatmulTuneResult,
  rankConfigs,
  storeConfig,
  workgroupTile,
} from "./_webgpu_matmul.ts";

export type { BufferPoolStats, MatmulConfig, MatmulTuneResult };

/**
 * Options of `WebGPUBackend.create` (and of `createBackend` when it picks
 * WebGPU).
 *
 * @example
 * ```ts
 * import type { WebGPUBackendOptions } from "@conveyor/core";
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
}

// Elementwise kernels: invocations per workgroup (matches their WGSL). Wide
// groups matter on CPU adapters, where each workgroup has a fixed cost.
const WG = 256;
// Column-sum kernels: invocations per workgroup, one column each.
const COL_WG = 64;
// Rows per workgroup in the column-sum stages.
const SUM_CHUNK = 64;
// Invocations and floats per invocation in the reduce stages (reduce.wgsl).
const REDUCE_WG = 64;
const REDUCE_PER = 16;
const MAX_GROUPS = 65535;
// Idle pool memory kept for reuse before buffers are given back.
const MAX_IDLE_BYTES = 512 * 1024 * 1024;

const STORAGE_USAGE = 0x0080 | 0x0004 | 0x0008; // STORAGE | COPY_SRC | COPY_DST
const STAGING_USAGE = 0x0001 | 0x0008; // MAP_READ | COPY_DST
const UNIFORM_USAGE = 0x0040 | 0x0008; // UNIFORM | COPY_DST

interface Pipeline {
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
}

function buf(t: Tensor): GPUBuffer {
  return t.storage as GPUBuffer;
}

const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);
const round4 = (n: number): number => Math.ceil(n / 4) * 4;

/** A 2-D grid of workgroups covering `count` of them (x ≤ 65535). */
function grid(count: number): [number, number, number] {
  const x = Math.min(count, MAX_GROUPS);
  return [x, ceilDiv(count, x), 1];
}

/**
 * The WebGPU backend. Create it with `WebGPUBackend.create()` (or
 * `createBackend("webgpu")`); tensors then live in GPU buffers and kernels
 * run as WGSL compute shaders.
 *
 * Integer inputs (embedding ids, cross-entropy targets) cannot be checked
 * without a read-back; out-of-range values give NaN rows or losses here,
 * while the CPU reference throws a RangeError.
 *
 * @example
 * ```ts
 * import { createBackend, ops } from "@conveyor/core";
 * // "auto" picks WebGPU when an adapter exists; the example stays on the CPU.
 * const be = await createBackend("cpu");
 * const a = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * console.log(await ops.matmul(a, a).toArray()); // Float32Array [7, 10, 15, 22]
 * ```
 */
export class WebGPUBackend implements Backend {
  /** Always `"webgpu"`. */
  readonly name: BackendName = "webgpu";
  /** The adapter's description. */
  readonly description: string;
  /** The device all tensors of this backend live on. */
  readonly device: GPUDevice;
  /** Whether the adapter runs shaders on the CPU (llvmpipe and the like). */
  readonly cpuAdapter: boolean;

  readonly #memory = new MemoryTracker();
  readonly #adapterKey: string;
  readonly #pool: BufferPool;
  readonly #staging: BufferPool;
  readonly #uniform: GPUBuffer;
  readonly #slot: number;
  readonly #maxSlots: number;
  readonly #uniformData: ArrayBuffer;
  readonly #u32: Uint32Array;
  readonly #f32: Float32Array;
  readonly #rowWG: number;
  readonly #maxBinding: number;
  readonly #pipelines = new Map<string, Pipeline>();
  readonly #layouts = new Map<string, GPUBindGroupLayout>();
  #encoder: GPUCommandEncoder | null = null;
  #pass: GPUComputePassEncoder | null = null;
  #slots = 0;
  #flushQueued = false;
  #error: Error | null = null;
  #destroyed = false;
  // Variant for matmuls with at least LARGE_MATMUL_OUTPUTS outputs (tuned)
  // and for smaller ones (quick to compile).
  #matmulLarge: MatmulConfig;
  #matmulSmall: MatmulConfig;
  #tuneResults: readonly MatmulTuneResult[] = [];

  private constructor(device: GPUDevice, info: GPUAdapterInfo, opts: WebGPUBackendOptions) {
    this.device = device;
    this.cpuAdapter = isCpuAdapter(info);
    this.#adapterKey = adapterKey(info);
    this.description = `WebGPU: ${info.description || info.vendor || "unknown adapter"}`;
    this.#maxBinding = device.limits.maxStorageBufferBindingSize;
    this.#pool = new BufferPool(device, STORAGE_USAGE, MAX_IDLE_BYTES);
    this.#staging = new BufferPool(device, STAGING_USAGE, MAX_IDLE_BYTES / 4);
    this.#slot = Math.max(256, device.limits.minUniformBufferOffsetAlignment);
    this.#maxSlots = Math.max(1, Math.floor(opts.maxDispatchesPerSubmit ?? 256));
    this.#uniform = device.createBuffer({
      size: this.#slot * this.#maxSlots,
      usage: UNIFORM_USAGE,
    });
    this.#uniformData = new ArrayBuffer(this.#slot * this.#maxSlots);
    this.#u32 = new Uint32Array(this.#uniformData);
    this.#f32 = new Float32Array(this.#uniformData);
    const rowWG = opts.rowWorkgroupSize ?? (this.cpuAdapter ? 8 : 64);
    if (!Number.isInteger(rowWG) || rowWG < 1 || rowWG > device.limits.maxComputeWorkgroupSizeX) {
      throw new RangeError(
        `rowWorkgroupSize must be an integer in [1, ${device.limits.maxComputeWorkgroupSizeX}], got ${rowWG}`,
      );
    }
    this.#rowWG = rowWG;
    this.#matmulLarge = this.#matmulSmall = defaultConfig(this.cpuAdapter);
    device.addEventListener("uncapturederror", (e) => {
      this.#error ??= new Error(`WebGPU error: ${(e as GPUUncapturedErrorEvent).error.message}`);
    });
    device.lost.then((info) => {
      if (!this.#destroyed) this.#error ??= new Error(`WebGPU device lost: ${info.message}`);
    });
  }

  /**
   * Opens the default (or given) adapter and device and readies the backend.
   * Throws an Error naming the cause when there is no WebGPU or no adapter.
   */
  static async create(opts: WebGPUBackendOptions = {}): Promise<WebGPUBackend> {
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
    const device = await adapter.requestDevice({
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
        checkConfig(
          tuned,
          device.limits.maxComputeInvocationsPerWorkgroup,
          device.limits.maxComputeWorkgroupStorageSize,
        );
      } catch (e) {
        be.destroy();
        throw e;
      }
      be.#matmulLarge = { ...tuned };
    } else if (choice === "auto") {
      const cached = cachedConfig(be.#adapterKey);
      if (cached !== undefined) {
        be.#matmulLarge = cached;
      } else {
        await be.tuneMatmul();
      }
    } else if (choice !== "default") {
      be.setMatmulConfig(choice);
    }
    return be;
  }

  // ---- introspection --------------------------------------------------------

  /** Memory accounting of tensors created on this backend. */
  get memory(): MemoryStats {
    return this.#memory;
  }

  /** Statistics of the GPU buffer pool behind the tensors. */
  get pool(): BufferPoolStats {
    return this.#pool.stats;
  }

  /**
   * The matmul kernel variant for large problems (at least 2^18 outputs):
   * the tuned one. Smaller matmuls use a variant that is quick to compile,
   * unless `setMatmulConfig` pinned one variant for all sizes.
   */
  get matmulConfig(): MatmulConfig {
    return this.#matmulLarge;
  }

  /** Timings of the last `tuneMatmul` on this backend, fastest first. */
  get tuneResults(): readonly MatmulTuneResult[] {
    return this.#tuneResults;
  }

  /**
   * Uses `config` for every later matmul of any size (validated against the
   * device limits); for tests, benchmarks and known-good devices.
   */
  setMatmulConfig(config: MatmulConfig): void {
    this.#live();
    checkConfig(
      config,
      this.device.limits.maxComputeInvocationsPerWorkgroup,
      this.device.limits.maxComputeWorkgroupStorageSize,
    );
    this.#matmulLarge = this.#matmulSmall = { ...config };
  }

  /**
   * Times the candidate matmul variants for this adapter on a mid-size
   * problem (512³), selects the fastest for large matmuls, caches the choice
   * for this adapter and returns all timings.
   */
  async tuneMatmul(): Promise<readonly MatmulTuneResult[]> {
    this.#live();
    const n = 512;
    const data = new Float32Array(n * n);
    for (let i = 0; i < data.length; i++) data[i] = ((i * 7919) % 1000) / 1000 - 0.5;
    const a = this.fromData(data, [n, n]);
    const b = this.fromData(data, [n, n]);
    const c = this.#newTensor([n, n]);
    const limits = this.device.limits;
    const candidates = candidateConfigs(this.cpuAdapter).filter((cfg) => {
      try {
        checkConfig(
          cfg,
          limits.maxComputeInvocationsPerWorkgroup,
          limits.maxComputeWorkgroupStorageSize,
        );
        return true;
      } catch {
        return false;
      }
    });
    const warmed = new Set<MatmulConfig>();
    const reps = new Map<MatmulConfig, number>();
    const time = async (cfg: MatmulConfig): Promise<number> => {
      await this.sync();
      if (!warmed.has(cfg)) {
        // Compiles the pipeline; not timed.
        this.#matmulInto(cfg, a, b, c, false, false);
        await this.sync();
        warmed.add(cfg);
      }
      let r = reps.get(cfg) ?? 1;
      for (;;) {
        const t0 = performance.now();
        for (let i = 0; i < r; i++) this.#matmulInto(cfg, a, b, c, false, false);
        await this.sync();
        const dt = (performance.now() - t0) / 1000;
        // A submit-and-wait round trip costs ~10 ms on some adapters: batch
        // more matmuls per sample until that is a small share of a sample.
        if (dt >= 0.04 || r >= 1024) {
          reps.set(cfg, r);
          return dt / r;
        }
        r *= dt < 0.005 ? 8 : 2;
      }
    };
    try {
      const results = await rankConfigs(candidates, 2 * n * n * n, 3, time);
      const best = results[0];
      if (best === undefined || !Number.isFinite(best.seconds)) {
        throw new Error(`matmul autotune: no candidate ran on ${this.description}`);
      }
      this.#matmulLarge = best.config;
      this.#tuneResults = results;
      storeConfig(this.#adapterKey, best.config);
      return results;
    } finally {
      a.dispose();
      b.dispose();
      c.dispose();
    }
  }

  // ---- storage ---------------------------------------------------------------

  /** Creates a tensor holding a copy of `data`. */
  fromData(data: Float32Array, shape: Shape): Tensor {
    this.#live();
    checkFromData(data, shape);
    const t = this.#newTensor(shape, true);
    if (data.length > 0) {
      // Offsets of a typed-array source count elements, not bytes.
      this.device.queue.writeBuffer(buf(t), 0, data as Float32Array<ArrayBuffer>, 0, data.length);
    }
    return t;
  }

  /** Creates a tensor of zeros. */
  zeros(shape: Shape): Tensor {
    this.#live();
    checkZeros(shape);
    const t = this.#newTensor(shape);
    this.#clear(buf(t), t.size);
    return t;
  }

  /** Copies a tensor's contents out once the work queued before it is done. */
  async read(t: Tensor): Promise<Float32Array> {
    this.#live();
    const src = buf(t);
    const bytes = t.size * 4;
    if (bytes === 0) {
      this.#throwPending();
      return new Float32Array(0);
    }
    const staging = this.#staging.acquire(bytes, true);
    this.#endPass();
    this.#enc().copyBufferToBuffer(src, 0, staging, 0, bytes);
    this.flush();
    try {
      await staging.mapAsync(GPUMapMode.READ, 0, bytes);
    } catch (e) {
      this.#throwPending();
      throw e;
    }
    const out = new Float32Array(staging.getMappedRange(0, bytes).slice(0));
    staging.unmap();
    this.#staging.releaseIdle(staging);
    this.#throwPending();
    return out;
  }

  /** Releases storage (called by `Tensor.dispose`). */
  release(storage: unknown, bytes: number): void {
    this.#memory.free(bytes);
    if (!this.#destroyed) this.#pool.release(storage as GPUBuffer);
  }

  /** Submits the recorded work now. */
  flush(): void {
    if (this.#encoder === null || this.#destroyed) return;
    this.#endPass();
    if (this.#slots > 0) {
      this.device.queue.writeBuffer(
        this.#uniform,
        0,
        this.#uniformData,
        0,
        this.#slots * this.#slot,
      );
    }
    this.device.queue.submit([this.#encoder.finish()]);
    this.#encoder = null;
    this.#slots = 0;
    this.#pool.submitted();
  }

  /** Submits the recorded work and waits until the GPU has finished it. */
  async sync(): Promise<void> {
    this.#live();
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    this.#throwPending();
  }

  /** Releases the device and every buffer; the backend is unusable after. */
  destroy(): void {
    if (this.#destroyed) return;
    this.flush();
    this.#destroyed = true;
    this.#pool.trim();
    this.#staging.trim();
    this.device.destroy();
  }

  // ---- kernels: elementwise ----------------------------------------------------

  /** Batched matrix product (see `Backend.matmul`). */
  matmul(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
    this.#live();
    const ar = a.shape.length, br = b.shape.length;
    const M = transA ? a.shape[ar - 1] : a.shape[ar - 2];
    const N = transB ? b.shape[br - 2] : b.shape[br - 1];
    const out = this.#newTensor([...a.shape.slice(0, -2), M, N]);
    const cfg = out.size >= LARGE_MATMUL_OUTPUTS ? this.#matmulLarge : this.#matmulSmall;
    this.#matmulInto(cfg, a, b, out, transA, transB);
    return out;
  }

  /** Elementwise `a + b`. */
  add(a: Tensor, b: Tensor): Tensor {
    return this.#binary(a, b, 0);
  }

  /** Elementwise `a - b`. */
  sub(a: Tensor, b: Tensor): Tensor {
    return this.#binary(a, b, 1);
  }

  /** Elementwise `a * b`. */
  mul(a: Tensor, b: Tensor): Tensor {
    return this.#binary(a, b, 2);
  }

  /** `x + bias` broadcast over rows. */
  addBias(x: Tensor, bias: Tensor): Tensor {
    this.#live();
    const out = this.#newTensor(x.shape);
    const cols = x.cols;
    if (x.size === 0 || cols === 0) return out;
    const vec = cols % 4 === 0;
    const units = vec ? x.size / 4 : x.size;
    this.#dispatch(
      KERNELS.addBias,
      { VEC: vec },
      [units, vec ? cols / 4 : cols],
      [],
      [buf(x), buf(bias), buf(out)],
      grid(ceilDiv(units, WG)),
    );
    return out;
  }

  /** `s * x`. */
  scale(x: Tensor, s: number): Tensor {
    this.#live();
    const out = this.#newTensor(x.shape);
    this.#vec4(KERNELS.scale, {}, x.size, [s], [buf(x), buf(out)]);
    return out;
  }

  /** In place `y += alpha * x`. */
  axpyInPlace(y: Tensor, alpha: number, x: Tensor): void {
    this.#live();
    this.#vec4(KERNELS.axpy, {}, y.size, [alpha], [buf(y), buf(x)]);
  }

  /** In place fill. */
  fillInPlace(x: Tensor, value: number): void {
    this.#live();
    this.#vec4(KERNELS.fill, {}, x.size, [value], [buf(x)]);
  }

  /** A fresh copy. */
  copy(x: Tensor): Tensor {
    this.#live();
    const out = this.#newTensor(x.shape);
    this.#copyBytes(buf(x), 0, buf(out), 0, x.size * 4);
    return out;
  }

  /** In place `dst ← src`: one buffer-to-buffer copy, no dispatch. */
  copyInPlace(dst: Tensor, src: Tensor): void {
    this.#live();
    this.#copyBytes(buf(src), 0, buf(dst), 0, src.size * 4);
  }

  /** In place `x ← s * x`. */
  scaleInPlace(x: Tensor, s: number): void {
    this.#live();
    this.#vec4(KERNELS.scaleInPlace, {}, x.size, [s], [buf(x)]);
  }

  /** `max(x, 0)`. */
  relu(x: Tensor): Tensor {
    return this.#activation(x, 0);
  }

  /** `dy * (x > 0)`. */
  reluBackward(x: Tensor, dy: Tensor): Tensor {
    return this.#activationBackward(x, dy, 0);
  }

  /** GELU (tanh approximation). */
  gelu(x: Tensor): Tensor {
    return this.#activation(x, 1);
  }

  /** `dy * gelu'(x)`. */
  geluBackward(x: Tensor, dy: Tensor): Tensor {
    return this.#activationBackward(x, dy, 1);
  }

  /** `tanh(x)`. */
  tanh(x: Tensor): Tensor {
    return this.#activation(x, 2);
  }

  /** `dy * (1 - y²)`. */
  tanhBackward(y: Tensor, dy: Tensor): Tensor {
    return this.#activationBackward(y, dy, 2);
  }

  // ---- kernels: row-wise -------------------------------------------------------

  /** Row softmax, optionally causal. */
  softmax(x: Tensor, causal: boolean): Tensor {
    this.#live();
    const out = this.#newTensor(x.shape);
    const cols = x.cols, rows = rowCount(x);
    if (rows > 0) {
      this.#dispatch(
        KERNELS.softmax,
        { CAUSAL: causal, WG: this.#rowWG },
        [rows, cols],
        [],
        [buf(x), buf(out)],
        grid(rows),
      );
    }
    return out;
  }

  /** Softmax input gradient. */
  softmaxBackward(y: Tensor, dy: Tensor): Tensor {
    this.#live();
    const out = this.#newTensor(y.shape);
    const cols = y.cols, rows = rowCount(y);
    if (rows > 0) {
      this.#dispatch(
        KERNELS.softmaxBackward,
        { WG: this.#rowWG },
        [rows, cols],
        [],
        [buf(y), buf(dy), buf(out)],
        grid(rows),
      );
    }
    return out;
  }

  /** Layer norm forward. */
  layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): LayerNormResult {
    this.#live();
    const cols = x.cols, rows = rowCount(x);
    const y = this.#newTensor(x.shape);
    const mean = this.#newTensor([rows]);
    const rstd = this.#newTensor([rows]);
    if (rows > 0) {
      this.#dispatch(
        KERNELS.layerNorm,
        { WG: this.#rowWG },
        [rows, cols],
        [eps],
        [buf(x), buf(gamma), buf(beta), buf(y), buf(mean), buf(rstd)],
        grid(rows),
      );
    }
    return { y, mean, rstd };
  }

  /** Layer norm input gradient. */
  layerNormBackwardInput(
    dy: Tensor,
    x: Tensor,
    mean: Tensor,
    rstd: Tensor,
    gamma: Tensor,
  ): Tensor {
    this.#live();
    const cols = x.cols, rows = rowCount(x);
    const out = this.#newTensor(x.shape);
    if (rows > 0) {
      this.#dispatch(
        KERNELS.layerNormBackwardInput,
        { WG: this.#rowWG },
        [rows, cols],
        [],
        [buf(dy), buf(x), buf(mean), buf(rstd), buf(gamma), buf(out)],
        grid(rows),
      );
    }
    return out;
  }

  /** Layer norm weight gradients. */
  layerNormBackwardWeight(
    dy: Tensor,
    x: Tensor,
    mean: Tensor,
    rstd: Tensor,
  ): { dgamma: Tensor; dbeta: Tensor } {
    this.#live();
    const cols = x.cols, rows = rowCount(x);
    const dgamma = this.#newTensor([cols]);
    const dbeta = this.#newTensor([cols]);
    if (cols === 0) return { dgamma, dbeta };
    if (rows === 0) {
      this.#clear(buf(dgamma), cols);
      this.#clear(buf(dbeta), cols);
      return { dgamma, dbeta };
    }
    const chunk = Math.max(SUM_CHUNK, ceilDiv(rows, MAX_GROUPS));
    const chunks = ceilDiv(rows, chunk);
    const partial = this.#pool.acquire(chunks * 2 * cols * 4, false);
    this.#dispatch(
      KERNELS.layerNormBackwardWeight,
      {},
      [rows, cols, chunk],
      [],
      [buf(dy), buf(x), buf(mean), buf(rstd), partial],
      [this.#groupsFor(cols), chunks, 1],
    );
    const both = this.#pool.acquire(2 * cols * 4, false);
    this.#columnSums(partial, chunks, 2 * cols, both);
    this.#pool.release(partial);
    this.#copyBytes(both, 0, buf(dgamma), 0, cols * 4);
    this.#copyBytes(both, cols * 4, buf(dbeta), 0, cols * 4);
    this.#pool.release(both);
    return { dgamma, dbeta };
  }

  /** Column sums `[..., N]` → `[N]`. */
  sumRows(x: Tensor): Tensor {
    this.#live();
    const cols = x.cols, rows = rowCount(x);
    const out = this.#newTensor([cols]);
    if (cols === 0) return out;
    if (rows === 0) {
      this.#clear(buf(out), cols);
      return out;
    }
    this.#columnSums(buf(x), rows, cols, buf(out));
    return out;
  }

  /** Sum of all elements, `[1]`. */
  sum(x: Tensor): Tensor {
    return this.#reduce(x, false);
  }

  /** Sum of squares, `[1]`. */
  sumSquares(x: Tensor): Tensor {
    return this.#reduce(x, true);
  }

  /** Softmax cross-entropy forward. */
  crossEntropy(logits: Tensor, targets: Tensor): CrossEntropyResult {
    this.#live();
    const cols = logits.cols, rows = rowCount(logits);
    const probs = this.#newTensor(logits.shape);
    const loss = this.#newTensor([rows]);
    if (rows > 0) {
      this.#dispatch(
        KERNELS.crossEntropy,
        { WG: this.#rowWG },
        [rows, cols],
        [],
        [buf(logits), buf(targets), buf(loss), buf(probs)],
        grid(rows),
      );
    }
    return { loss, probs };
  }

  /** `(probs - onehot(targets)) * scale`. */
  crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor {
    this.#live();
    const out = this.#newTensor(probs.shape);
    const n = probs.size;
    if (n > 0) {
      this.#dispatch(
        KERNELS.crossEntropyBackward,
        {},
        [n, probs.cols],
        [scale],
        [buf(probs), buf(targets), buf(out)],
        grid(ceilDiv(n, WG)),
      );
    }
    return out;
  }

  /** Row gather. */
  embedding(table: Tensor, ids: Tensor): Tensor {
    this.#live();
    const [V, C] = table.shape;
    const out = this.#newTensor([...ids.shape, C]);
    if (out.size === 0) return out;
    if (V === 0) {
      // Every id is out of range of an empty table.
      this.#vec4(KERNELS.fill, {}, out.size, [NaN], [buf(out)]);
      return out;
    }
    const vec = C % 4 === 0;
    const units = vec ? out.size / 4 : out.size;
    this.#dispatch(
      KERNELS.embedding,
      { VEC: vec },
      [units, vec ? C / 4 : C, V],
      [],
      [buf(table), buf(ids), buf(out)],
      grid(ceilDiv(units, WG)),
    );
    return out;
  }

  /** Scatter-add of `dy` rows into `dTable`. */
  embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void {
    this.#live();
    const C = dTable.shape[1];
    if (dTable.size === 0 || ids.size === 0) return;
    const vec = C % 4 === 0;
    const units = vec ? dTable.size / 4 : dTable.size;
    this.#dispatch(
      KERNELS.embeddingBackward,
      { VEC: vec },
      [units, vec ? C / 4 : C, ids.size],
      [],
      [buf(dTable), buf(ids), buf(dy)],
      grid(ceilDiv(units, WG)),
    );
  }

  /** AdamW with bias correction and decoupled weight decay. */
  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWParams): void {
    this.#live();
    const { lr, beta1, beta2, eps, weightDecay, step } = hp;
    const bc1 = 1 - Math.pow(beta1, step), bc2 = 1 - Math.pow(beta2, step);
    this.#vec4(
      KERNELS.adamw,
      {},
      param.size,
      [lr, beta1, 1 - beta1, beta2, 1 - beta2, eps, weightDecay, bc1, bc2],
      [buf(param), buf(grad), buf(m), buf(v)],
    );
  }

  /** SGD with optional momentum buffer and L2 weight decay, in one pass. */
  sgdInPlace(param: Tensor, grad: Tensor, buffer: Tensor | null, hp: SGDParams): void {
    this.#live();
    const f32s = [hp.lr, hp.momentum, hp.weightDecay];
    if (buffer === null) {
      this.#vec4(KERNELS.sgdPlain, { MOMENTUM: false }, param.size, f32s, [buf(param), buf(grad)]);
    } else {
      this.#vec4(KERNELS.sgd, { MOMENTUM: true }, param.size, f32s, [
        buf(param),
        buf(grad),
        buf(buffer),
      ]);
    }
  }

  // ---- kernels: copies -------------------------------------------------------------

  /** Copy of rows `[start, end)` along dimension 0. */
  sliceRows(x: Tensor, start: number, end: number): Tensor {
    this.#live();
    const inner = shapeSize(x.shape.slice(1));
    const out = this.#newTensor([end - start, ...x.shape.slice(1)]);
    this.#copyBytes(buf(x), start * inner * 4, buf(out), 0, out.size * 4);
    return out;
  }

  /** Concatenation along dimension 0. */
  concatRows(parts: readonly Tensor[]): Tensor {
    this.#live();
    let rows = 0;
    for (const p of parts) rows += p.shape[0];
    const out = this.#newTensor([rows, ...parts[0].shape.slice(1)]);
    let off = 0;
    for (const p of parts) {
      this.#copyBytes(buf(p), 0, buf(out), off, p.size * 4);
      off += p.size * 4;
    }
    return out;
  }

  /** Axis permutation (a copy). */
  permute(x: Tensor, perm: readonly number[]): Tensor {
    this.#live();
    const out = this.#newTensor(perm.map((p) => x.shape[p]));
    if (out.size === 0) return out;
    const { shape, strides } = mergeAxes(x.shape, perm);
    if (shape.length <= 1) {
      // Only one axis of extent > 1 moves: the data order is unchanged.
      this.#copyBytes(buf(x), 0, buf(out), 0, x.size * 4);
      return out;
    }
    if (shape.length > 8) {
      throw new RangeError(
        `permute: the WebGPU kernel handles at most 8 axes after merging adjacent ones, got ${shape.length} for shape ${
          fmtShape(x.shape)
        } and perm [${perm.join(", ")}]`,
      );
    }
    const u = [out.size, shape.length, 0, 0];
    for (let i = 0; i < 8; i++) u.push(shape[i] ?? 1);
    for (let i = 0; i < 8; i++) u.push(strides[i] ?? 0);
    this.#dispatch(KERNELS.permute, {}, u, [], [buf(x), buf(out)], grid(ceilDiv(out.size, WG)));
    return out;
  }

  // ---- internals ---------------------------------------------------------------------

  #live(): void {
    if (this.#destroyed) throw new TypeError("WebGPU backend used after destroy()");
  }

  #throwPending(): void {
    const e = this.#error;
    if (e !== null) {
      this.#error = null;
      throw e;
    }
  }

  #newTensor(shape: Shape, viaQueue = false): Tensor {
    const bytes = shapeSize(shape) * 4;
    if (bytes > this.#maxBinding) {
      throw new RangeError(
        `tensor of shape ${
          fmtShape(shape)
        } needs ${bytes} bytes, more than this adapter's maxStorageBufferBindingSize (${this.#maxBinding})`,
      );
    }
    const b = this.#pool.acquire(bytes, viaQueue);
    this.#memory.alloc(bytes);
    return new Tensor(this, shape, b, bytes);
  }

  #enc(): GPUCommandEncoder {
    if (this.#encoder === null) {
      this.#encoder = this.device.createCommandEncoder();
      if (!this.#flushQueued) {
        // Submit what the current synchronous run records, at its end.
        this.#flushQueued = true;
        queueMicrotask(() => {
          this.#flushQueued = false;
          this.flush();
        });
      }
    }
    return this.#encoder;
  }

  #endPass(): void {
    if (this.#pass !== null) {
      this.#pass.end();
      this.#pass = null;
    }
  }

  #copyBytes(src: GPUBuffer, srcOff: number, dst: GPUBuffer, dstOff: number, bytes: number): void {
    if (bytes === 0) return;
    this.#endPass();
    this.#enc().copyBufferToBuffer(src, srcOff, dst, dstOff, bytes);
  }

  /** Zeroes the first `floats` floats (rounded up to whole vec4s). */
  #clear(b: GPUBuffer, floats: number): void {
    const bytes = Math.min(b.size, round4(floats) * 4);
    if (bytes === 0) return;
    this.#endPass();
    this.#enc().clearBuffer(b, 0, bytes);
  }

  #layout(bindings: readonly string[]): GPUBindGroupLayout {
    const key = bindings.join("");
    let layout = this.#layouts.get(key);
    if (layout === undefined) {
      const entries: GPUBindGroupLayoutEntry[] = [
        { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform" } },
      ];
      bindings.forEach((b, i) => {
        entries.push({
          binding: i + 1,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: b === "r" ? "read-only-storage" : "storage" },
        });
      });
      layout = this.device.createBindGroupLayout({ entries });
      this.#layouts.set(key, layout);
    }
    return layout;
  }

  #pipeline(kernel: KernelSource, defines: ShaderDefines): Pipeline {
    const key = kernel.name + JSON.stringify(defines);
    let p = this.#pipelines.get(key);
    if (p === undefined) {
      const layout = this.#layout(kernel.bindings);
      const module = this.device.createShaderModule({
        label: kernel.name,
        code: specialize(kernel.src, defines),
      });
      const pipeline = this.device.createComputePipeline({
        label: kernel.name,
        layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module, entryPoint: "main" },
      });
      p = { pipeline, layout };
      this.#pipelines.set(key, p);
    }
    return p;
  }

  /** Records one dispatch; `u32s` then `f32s` fill the kernel's Params. */
  #dispatch(
    kernel: KernelSource,
    defines: ShaderDefines,
    u32s: readonly number[],
    f32s: readonly number[],
    buffers: readonly GPUBuffer[],
    groups: readonly [number, number, number],
  ): void {
    if (groups[0] === 0 || groups[1] === 0 || groups[2] === 0) return;
    const { pipeline, layout } = this.#pipeline(kernel, defines);
    if (this.#slots >= this.#maxSlots) this.flush();
    const slot = this.#slots++;
    const base = (slot * this.#slot) / 4;
    for (let i = 0; i < u32s.length; i++) this.#u32[base + i] = u32s[i];
    for (let i = 0; i < f32s.length; i++) this.#f32[base + u32s.length + i] = f32s[i];
    const entries: GPUBindGroupEntry[] = [
      {
        binding: 0,
        resource: { buffer: this.#uniform, offset: slot * this.#slot, size: this.#slot },
      },
    ];
    for (let i = 0; i < buffers.length; i++) {
      entries.push({ binding: i + 1, resource: { buffer: buffers[i] } });
    }
    const bindGroup = this.device.createBindGroup({ layout, entries });
    const enc = this.#enc();
    this.#pass ??= enc.beginComputePass();
    this.#pass.setPipeline(pipeline);
    this.#pass.setBindGroup(0, bindGroup);
    this.#pass.dispatchWorkgroups(groups[0], groups[1], groups[2]);
  }

  /** Elementwise kernel over ceil(n / 4) vec4s with a `Params { n4, f32s… }`. */
  #vec4(
    kernel: KernelSource,
    defines: ShaderDefines,
    n: number,
    f32s: readonly number[],
    buffers: readonly GPUBuffer[],
  ): void {
    const n4 = ceilDiv(n, 4);
    if (n4 === 0) return;
    this.#dispatch(kernel, defines, [n4], f32s, buffers, grid(ceilDiv(n4, WG)));
  }

  #groupsFor(cols: number): number {
    const g = ceilDiv(cols, COL_WG);
    if (g > MAX_GROUPS) {
      throw new RangeError(
        `column reductions on WebGPU support at most ${MAX_GROUPS * COL_WG} columns, got ${cols}`,
      );
    }
    return g;
  }

  #binary(a: Tensor, b: Tensor, op: number): Tensor {
    this.#live();
    const out = this.#newTensor(a.shape);
    this.#vec4(KERNELS.binary, { OP: op }, a.size, [], [buf(a), buf(b), buf(out)]);
    return out;
  }

  #activation(x: Tensor, act: number): Tensor {
    this.#live();
    const out = this.#newTensor(x.shape);
    this.#vec4(KERNELS.activation, { ACT: act }, x.size, [], [buf(x), buf(out)]);
    return out;
  }

  #activationBackward(v: Tensor, dy: Tensor, act: number): Tensor {
    this.#live();
    const out = this.#newTensor(v.shape);
    this.#vec4(KERNELS.activationBackward, { ACT: act }, v.size, [], [buf(v), buf(dy), buf(out)]);
    return out;
  }

  /** Sums `rows` rows of `cols` floats from `src` into `dst[0 .. cols)`. */
  #columnSums(src: GPUBuffer, rows: number, cols: number, dst: GPUBuffer): void {
    const groupsX = this.#groupsFor(cols);
    let cur = src, curRows = rows;
    for (;;) {
      const chunk = Math.max(SUM_CHUNK, ceilDiv(curRows, MAX_GROUPS));
      const chunks = ceilDiv(curRows, chunk);
      const next = chunks === 1 ? dst : this.#pool.acquire(chunks * cols * 4, false);
      this.#dispatch(KERNELS.sumRows, {}, [curRows, cols, chunk], [], [cur, next], [
        groupsX,
        chunks,
        1,
      ]);
      if (cur !== src) this.#pool.release(cur);
      if (chunks === 1) return;
      cur = next;
      curRows = chunks;
    }
  }

  #reduce(x: Tensor, square: boolean): Tensor {
    this.#live();
    const out = this.#newTensor([1]);
    let n = x.size;
    if (n === 0) {
      this.#clear(buf(out), 1);
      return out;
    }
    let cur = buf(x), first = true;
    for (;;) {
      const groups = ceilDiv(n, REDUCE_WG * REDUCE_PER);
      const next = groups === 1 ? buf(out) : this.#pool.acquire(groups * 4, false);
      this.#dispatch(
        KERNELS.reduce,
        { SQUARE: square && first },
        [n],
        [],
        [cur, next],
        grid(groups),
      );
      if (!first) this.#pool.release(cur);
      if (groups === 1) return out;
      cur = next;
      n = groups;
      first = false;
    }
  }

  /**
   * Records C = op(A) · op(B) into `out` with variant `cfg`. The direct
   * family needs row strides and K padded to multiples of 4: operands that
   * are not are copied into zero-padded temporaries, and a result with N not
   * a multiple of 4 is computed padded and cropped.
   */
  #matmulInto(
    cfg: MatmulConfig,
    a: Tensor,
    b: Tensor,
    out: Tensor,
    transA: boolean,
    transB: boolean,
  ): void {
    const ar = a.shape.length, br = b.shape.length;
    const M = transA ? a.shape[ar - 1] : a.shape[ar - 2];
    const K = transA ? a.shape[ar - 2] : a.shape[ar - 1];
    const N = transB ? b.shape[br - 2] : b.shape[br - 1];
    const batch = shapeSize(a.shape.slice(0, -2));
    const bShared = br === 2;
    if (out.size === 0) return;
    if (K === 0) {
      this.#clear(buf(out), out.size);
      return;
    }
    const temps: GPUBuffer[] = [];
    let A = buf(a), B = buf(b), C = buf(out);
    const direct = cfg.family === "direct";
    const K4 = round4(K), M4 = round4(M), N4 = round4(N);
    // The direct family reads A as [M, K4] or [K4, M4] and B as [K4, N4] or
    // [N, K4], zero-padded; other layouts are copied into that shape.
    let padA = direct, padB = direct;
    if (cfg.transposes === "copy") {
      // Read transposed operands in the plain layout: one strided copy
      // (padding included) instead of another kernel variant to compile.
      if (transA) {
        A = this.#strided(A, batch, M, K, 1, M, K * M, M, direct ? K4 : K, temps);
        padA = false;
      }
      if (transB) {
        B = this.#strided(
          B,
          bShared ? 1 : batch,
          K,
          N,
          1,
          K,
          N * K,
          direct ? K4 : K,
          direct ? N4 : N,
          temps,
        );
        padB = false;
      }
      transA = transB = false;
    }
    // Row strides (elements) of A, B, C as the kernel will see them.
    let lda = transA ? M : K, ldb = transB ? K : N, ldc = N;
    let kk = K;
    if (direct) {
      const [aRows, aCols, aRows4, aCols4] = transA ? [K, M, K4, M4] : [M, K, M, K4];
      if (padA && (aRows !== aRows4 || aCols !== aCols4)) {
        A = this.#strided(A, batch, aRows, aCols, aCols, 1, aRows * aCols, aRows4, aCols4, temps);
      }
      const [bRows, bCols, bRows4, bCols4] = transB ? [N, K, N, K4] : [K, N, K4, N4];
      if (padB && (bRows !== bRows4 || bCols !== bCols4)) {
        B = this.#strided(
          B,
          bShared ? 1 : batch,
          bRows,
          bCols,
          bCols,
          1,
          bRows * bCols,
          bRows4,
          bCols4,
          temps,
        );
      }
      lda = transA ? M4 : K4;
      ldb = transB ? K4 : N4;
      kk = K4;
      if (N !== N4) {
        C = this.#pool.acquire(batch * M * N4 * 4, false);
        temps.push(C);
        ldc = N4;
      }
    }
    const strideA = (transA ? kk : M) * lda;
    const strideB = bShared ? 0 : (transB ? N : kk) * ldb;
    const strideC = M * ldc;
    const kernel = cfg.family === "direct" ? KERNELS.matmul : KERNELS.matmulTiled;
    const defines = configDefines(cfg, transA, transB);
    const { bm, bn } = workgroupTile(cfg);
    const gx = ceilDiv(N, bn), gy = ceilDiv(M, bm);
    for (let oz = 0; oz < batch; oz += MAX_GROUPS) {
      for (let oy = 0; oy < gy; oy += MAX_GROUPS) {
        for (let ox = 0; ox < gx; ox += MAX_GROUPS) {
          this.#dispatch(
            kernel,
            defines,
            [M, N, kk, lda, ldb, ldc, strideA, strideB, strideC, ox, oy, oz],
            [],
            [A, B, C],
            [
              Math.min(MAX_GROUPS, gx - ox),
              Math.min(MAX_GROUPS, gy - oy),
              Math.min(MAX_GROUPS, batch - oz),
            ],
          );
        }
      }
    }
    if (C !== buf(out)) {
      // Crop the padded columns.
      const n = batch * M * N;
      this.#dispatch(
        KERNELS.copy2d,
        {},
        [n, M, N, M, N, ldc, 1, M * ldc],
        [],
        [C, buf(out)],
        grid(ceilDiv(n, WG)),
      );
    }
    for (const t of temps) this.#pool.release(t);
  }

  /**
   * A contiguous [batch, outRows, outCols] copy of a strided [batch, rows,
   * cols] view of `src` (element (r, c) at r·rowStride + c·colStride, batch
   * entries batchStride apart), zero-padded past rows / cols. Registered in
   * `temps` for release once the matmul is recorded.
   */
  #strided(
    src: GPUBuffer,
    batch: number,
    rows: number,
    cols: number,
    rowStride: number,
    colStride: number,
    batchStride: number,
    outRows: number,
    outCols: number,
    temps: GPUBuffer[],
  ): GPUBuffer {
    const n = batch * outRows * outCols;
    const dst = this.#pool.acquire(n * 4, false);
    temps.push(dst);
    this.#dispatch(
      KERNELS.copy2d,
      {},
      [n, outRows, outCols, rows, cols, rowStride, colStride, batchStride],
      [],
      [src, dst],
      grid(ceilDiv(n, WG)),
    );
    return dst;
  }
}

/**
 * Output shape and input strides of a permutation after dropping axes of
 * extent 1 and merging output axes whose input axes are adjacent and in order.
 */
function mergeAxes(
  shape: Shape,
  perm: readonly number[],
): { shape: number[]; strides: number[] } {
  const inStrides = new Array<number>(shape.length);
  let s = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    inStrides[d] = s;
    s *= shape[d];
  }
  const outShape: number[] = [];
  const strides: number[] = [];
  let last = -2;
  for (const p of perm) {
    if (shape[p] === 1) continue;
    if (p === last + 1 && outShape.length > 0) {
      outShape[outShape.length - 1] *= shape[p];
      strides[strides.length - 1] = inStrides[p];
    } else {
      outShape.push(shape[p]);
      strides.push(inStrides[p]);
    }
    last = p;
  }
  return { shape: outShape, strides };
}
