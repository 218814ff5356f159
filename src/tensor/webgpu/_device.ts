/**
 * The device core of the WebGPU backend: what every kernel family shares.
 *
 * - Recording and submitting. Kernels only record work. Dispatches go into
 *   one command encoder (one compute pass where possible) and are submitted
 *   in batches: by `flush()`, when a batch is full, by `read()`, and at the
 *   latest in a microtask after the synchronous code that recorded them, so
 *   the GPU never idles on unsubmitted work.
 * - Uniforms. Each dispatch gets a slot of a per-batch uniform arena, filled
 *   by name from the kernel's `Params` layout (`_params.ts`).
 * - Pipelines are compiled once per device and kernel variant (the cache
 *   lives here, one per device); bind group layouts come from each kernel's
 *   declared bindings; bind groups are built per dispatch.
 * - Buffers come from a size-bucketed pool (`_pool.ts` says when a released
 *   buffer may be reused); read-backs, marks and `sync()` go through
 *   `_device_reads.ts` (staging buffers, Deno's immediate maps).
 * - Errors raised by the device asynchronously (validation, device loss,
 *   out-of-range ids found by a device check) are kept and thrown by the
 *   next `read()` or `sync()`.
 * - Host records of uploaded integer data (`_host_values.ts`) are kept per
 *   buffer and forgotten on any write to it: every dispatch binding it
 *   read-write, every copy or clear into it, its release.
 *
 * @module
 */

import type { Backend, Shape } from "../backend.ts";
import { MemoryTracker } from "../_memory.ts";
import { rowCount } from "../_rows.ts";
import { fmtShape } from "../_validate.ts";
import { createTensor, shapeSize, type Tensor, tensorStorage } from "../tensor.ts";
import type { KernelSource } from "./_kernels.ts";
import type { ParamFields, ParamValues } from "./_params.ts";
import { writeParams } from "./_params.ts";
import { type HostValues, recordValues } from "./_host_values.ts";
import { BufferPool } from "./_pool.ts";
import { DeviceReads } from "./_device_reads.ts";
import type { ReadPath } from "./_readback.ts";
import { type ShaderDefines, specialize } from "./_shader.ts";

/** Invocations per workgroup of the elementwise kernels (matches their WGSL). */
export const WG = 256;
/** Most workgroups along one dispatch dimension. */
export const MAX_GROUPS = 65535;
// Idle pool memory kept for reuse before buffers are given back.
const MAX_IDLE_BYTES = 512 * 1024 * 1024;

const STORAGE_USAGE = 0x0080 | 0x0004 | 0x0008; // STORAGE | COPY_SRC | COPY_DST
const UNIFORM_USAGE = 0x0040 | 0x0008; // UNIFORM | COPY_DST

/** The GPU buffer behind a tensor. */
export function buf(t: Tensor): GPUBuffer {
  return tensorStorage(t) as GPUBuffer;
}

/** `ceil(a / b)`. */
export const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);
/** `n` rounded up to a multiple of 4. */
export const round4 = (n: number): number => Math.ceil(n / 4) * 4;

/** A 2-D grid of workgroups covering `count` of them (x ≤ 65535). */
export function grid(count: number): [number, number, number] {
  const x = Math.min(count, MAX_GROUPS);
  return [x, ceilDiv(count, x), 1];
}

interface Pipeline {
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
}

/** Options of the device core (a subset of `WebGPUBackendOptions`). */
export interface DeviceCoreOptions {
  /** Workgroup size of the row-wise kernels (softmax, layer norm, ...). */
  readonly rowWorkgroupSize?: number;
  /** Dispatches recorded before a batch is submitted (default 256). */
  readonly maxDispatchesPerSubmit?: number;
  /** Embedding backward variant (see `_embedding.ts`); default `"auto"`. */
  readonly embeddingBackward?: "auto" | "scan" | "sort";
  /** Whether sorts use workgroup memory for short distances (default: not on CPU adapters). */
  readonly sortInWorkgroupMemory?: boolean;
  /** `"auto"` (default): detect the read path once; `"awaited"`: always await maps. */
  readonly readPath?: "auto" | "awaited";
}

/** Submission, uniforms, pipelines, buffers and errors of one device. */
export class DeviceCore {
  /** The device. */
  readonly device: GPUDevice;
  /** Whether the adapter runs shaders on the CPU. */
  readonly cpuAdapter: boolean;
  /** Memory accounting of the tensors of this device. */
  readonly memory: MemoryTracker = new MemoryTracker();
  /** Storage buffers behind tensors and temporaries. */
  readonly pool: BufferPool;
  /** Invocations per workgroup of the row-wise kernels. */
  readonly rowWG: number;
  /** Embedding backward variant: by size, or forced. */
  readonly embeddingBackward: "auto" | "scan" | "sort";
  /** Whether sorts do their short distances in workgroup memory. */
  readonly sortInWorkgroupMemory: boolean;
  readonly #owner: Backend;
  readonly #maxBinding: number;
  readonly #uniform: GPUBuffer;
  readonly #slot: number;
  readonly #maxSlots: number;
  readonly #uniformData: ArrayBuffer;
  readonly #u32: Uint32Array;
  readonly #i32: Int32Array;
  readonly #f32: Float32Array;
  readonly #hostValues = new WeakMap<GPUBuffer, HostValues>();
  readonly #pipelines = new Map<string, Pipeline>();
  readonly #layouts = new Map<string, GPUBindGroupLayout>();
  #encoder: GPUCommandEncoder | null = null;
  #pass: GPUComputePassEncoder | null = null;
  #slots = 0;
  #flushQueued = false;
  #error: Error | null = null;
  #destroyed = false;
  #closed = false;
  readonly #reads: DeviceReads;

  /** Readies `device` for `owner` (the backend tensors will name). */
  constructor(device: GPUDevice, cpuAdapter: boolean, owner: Backend, opts: DeviceCoreOptions) {
    this.device = device;
    this.cpuAdapter = cpuAdapter;
    this.#owner = owner;
    this.#maxBinding = device.limits.maxStorageBufferBindingSize;
    this.pool = new BufferPool(device, STORAGE_USAGE, MAX_IDLE_BYTES);
    this.#reads = new DeviceReads(
      device,
      {
        encoder: () => {
          this.#endPass();
          return this.#enc();
        },
        flush: () => this.flush(),
        throwPending: () => this.throwPending(),
      },
      opts.readPath ?? "auto",
      MAX_IDLE_BYTES / 4,
    );
    this.#slot = Math.max(256, device.limits.minUniformBufferOffsetAlignment);
    this.#maxSlots = Math.max(1, Math.floor(opts.maxDispatchesPerSubmit ?? 256));
    this.#uniform = device.createBuffer({
      size: this.#slot * this.#maxSlots,
      usage: UNIFORM_USAGE,
    });
    this.#uniformData = new ArrayBuffer(this.#slot * this.#maxSlots);
    this.#u32 = new Uint32Array(this.#uniformData);
    this.#i32 = new Int32Array(this.#uniformData);
    this.#f32 = new Float32Array(this.#uniformData);
    const rowWG = opts.rowWorkgroupSize ?? (cpuAdapter ? 8 : 64);
    if (!Number.isInteger(rowWG) || rowWG < 1 || rowWG > device.limits.maxComputeWorkgroupSizeX) {
      throw new RangeError(
        `rowWorkgroupSize must be an integer in [1, ${device.limits.maxComputeWorkgroupSizeX}], got ${rowWG}`,
      );
    }
    this.rowWG = rowWG;
    const eb = opts.embeddingBackward ?? "auto";
    if (eb !== "auto" && eb !== "scan" && eb !== "sort") {
      throw new RangeError(
        `embeddingBackward must be "auto", "scan" or "sort", got ${JSON.stringify(eb)}`,
      );
    }
    this.embeddingBackward = eb;
    this.sortInWorkgroupMemory = opts.sortInWorkgroupMemory ?? !cpuAdapter;
    device.addEventListener("uncapturederror", (e) => {
      this.#error ??= new Error(`WebGPU error: ${(e as GPUUncapturedErrorEvent).error.message}`);
    });
    device.lost.then((info) => {
      if (!this.#destroyed) this.#error ??= new Error(`WebGPU device lost: ${info.message}`);
    });
  }

  /** Largest storage binding of this device, in bytes. */
  get maxBindingBytes(): number {
    return this.#maxBinding;
  }

  /** Throws a TypeError once the backend is closed (or closing). */
  live(): void {
    if (this.#closed || this.#destroyed) {
      throw new TypeError("WebGPU backend used after close(); create a new backend");
    }
  }

  /** True once `close()` has been called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Keeps `e` to be thrown by the next `read()` or `sync()` (the first one
   * kept wins), for errors found by the device after the op returned.
   */
  deferError(e: Error): void {
    this.#error ??= e;
  }

  /** Throws (and forgets) an error the device reported since the last check. */
  throwPending(): void {
    const e = this.#error;
    if (e !== null) {
      this.#error = null;
      throw e;
    }
  }

  // ---- buffers and tensors --------------------------------------------------

  /**
   * A tensor of `shape` on a pool buffer; `viaQueue` when it will be filled
   * by `queue.writeBuffer` (see `_pool.ts`).
   */
  newTensor(shape: Shape, viaQueue = false): Tensor {
    const bytes = shapeSize(shape) * 4;
    if (bytes > this.#maxBinding) {
      throw new RangeError(
        `tensor of shape ${
          fmtShape(shape)
        } needs ${bytes} bytes, more than this adapter's maxStorageBufferBindingSize (${this.#maxBinding})`,
      );
    }
    const b = this.pool.acquire(bytes, viaQueue);
    this.memory.alloc(bytes);
    return createTensor(this.#owner, shape, b, bytes);
  }

  /** A tensor holding a copy of `data` (arguments already checked). */
  upload(data: Float32Array, shape: Shape): Tensor {
    const t = this.newTensor(shape, true);
    if (data.length > 0) {
      // Offsets of a typed-array source count elements, not bytes.
      this.device.queue.writeBuffer(buf(t), 0, data as Float32Array<ArrayBuffer>, 0, data.length);
    }
    const h = recordValues(data);
    if (h !== null) this.#hostValues.set(buf(t), h);
    return t;
  }

  /** What the host knows of a tensor's values (`_host_values.ts`), if anything. */
  hostValues(t: Tensor): HostValues | undefined {
    return this.#hostValues.get(buf(t));
  }

  /** Records what the host knows of `t`'s values, right after the op that wrote them. */
  setHostValues(t: Tensor, h: HostValues | null): void {
    if (h !== null && h.length === t.size) this.#hostValues.set(buf(t), h);
  }

  /** A temporary buffer of at least `bytes` for recorded work; give it back with `pool.release`. */
  temp(bytes: number): GPUBuffer {
    return this.pool.acquire(bytes, false);
  }

  /** Records a buffer-to-buffer copy (nothing for 0 bytes). */
  copyBytes(src: GPUBuffer, srcOff: number, dst: GPUBuffer, dstOff: number, bytes: number): void {
    this.#hostValues.delete(dst);
    if (bytes === 0) return;
    this.#endPass();
    this.#enc().copyBufferToBuffer(src, srcOff, dst, dstOff, bytes);
  }

  /** Records zeroing of the first `floats` floats (rounded up to whole vec4s). */
  clear(b: GPUBuffer, floats: number): void {
    this.#hostValues.delete(b);
    const bytes = Math.min(b.size, round4(floats) * 4);
    if (bytes === 0) return;
    this.#endPass();
    this.#enc().clearBuffer(b, 0, bytes);
  }

  // ---- dispatch ---------------------------------------------------------------

  /**
   * Records one dispatch of `kernel` specialised by `defines`, with its
   * `Params` given by name and its storage `buffers` in binding order.
   */
  dispatch<F extends ParamFields>(
    kernel: KernelSource<F>,
    defines: ShaderDefines,
    params: ParamValues<F>,
    buffers: readonly GPUBuffer[],
    groups: readonly [number, number, number],
  ): void {
    if (groups[0] === 0 || groups[1] === 0 || groups[2] === 0) return;
    const { pipeline, layout } = this.#pipeline(kernel, defines);
    if (this.#slots >= this.#maxSlots) this.flush();
    const slot = this.#slots;
    writeParams(
      kernel.name,
      kernel.layout,
      params as Readonly<Record<string, number | readonly number[]>>,
      this.#u32,
      this.#i32,
      this.#f32,
      (slot * this.#slot) / 4,
    );
    this.#slots++;
    for (let i = 0; i < buffers.length; i++) {
      if (kernel.bindings[i] === "w") this.#hostValues.delete(buffers[i]);
    }
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

  /**
   * An elementwise kernel over ceil(n / 4) vec4s: its `Params` count them
   * in `n`, filled here; `params` gives the rest by name.
   */
  vec4<F extends ParamFields & { readonly n: "u32" }>(
    kernel: KernelSource<F>,
    defines: ShaderDefines,
    n: number,
    params: Omit<ParamValues<F>, "n">,
    buffers: readonly GPUBuffer[],
  ): void {
    const n4 = ceilDiv(n, 4);
    if (n4 === 0) return;
    const all = { ...params, n: n4 } as unknown as ParamValues<F>;
    this.dispatch(kernel, defines, all, buffers, grid(ceilDiv(n4, WG)));
  }

  /**
   * A row-wise kernel (`_rows.wgsl`) over the rows of `x` (its last
   * dimension): one workgroup of `rowWG` invocations per row, nothing when
   * there are no rows. Its `Params` start with `rows` and `cols`, filled
   * here; `params` gives the rest by name.
   */
  perRow<F extends ParamFields & { readonly rows: "u32"; readonly cols: "u32" }>(
    kernel: KernelSource<F>,
    defines: ShaderDefines,
    x: Tensor,
    params: Omit<ParamValues<F>, "rows" | "cols">,
    buffers: readonly GPUBuffer[],
  ): void {
    const rows = rowCount(x);
    if (rows === 0) return;
    const all = { ...params, rows, cols: x.cols } as unknown as ParamValues<F>;
    this.dispatch(kernel, { ...defines, WG: this.rowWG }, all, buffers, grid(rows));
  }

  // ---- submission and read-back ---------------------------------------------------

  /** How this device's read-backs complete (see `_readback.ts`). */
  get readPath(): ReadPath {
    return this.#reads.path;
  }

  /** Copies a tensor's contents out once the work queued before it is done. */
  async read(t: Tensor): Promise<Float32Array> {
    return await this.#readTensor(t);
  }

  /**
   * Copies a tensor's contents out now where this device's read-backs
   * complete within the call (see `_readback.ts`): the data, or null where
   * it can only come back through {@linkcode DeviceCore.read}.
   */
  readSync(t: Tensor): Float32Array | null {
    if (this.#reads.path !== "immediate") return null;
    const got = this.#readTensor(t);
    if (got instanceof Float32Array) return got;
    // Not there after all: the map finishes in the background; the caller reads again.
    got.catch(() => {});
    return null;
  }

  #readTensor(t: Tensor): Float32Array | Promise<Float32Array> {
    this.live();
    const bytes = t.size * 4;
    if (bytes === 0) {
      this.throwPending();
      return new Float32Array(0);
    }
    return this.#reads.read(buf(t), bytes);
  }

  /**
   * Copies `bytes` of `src` out without waiting for them: `then` gets the
   * data once a later read or sync has drained the queue (not at all if the
   * backend is destroyed first). For checks whose outcome is reported
   * through {@linkcode deferError}.
   */
  readBackLater(src: GPUBuffer, bytes: number, then: (data: ArrayBuffer) => void): void {
    this.#reads.later(src, bytes, then);
  }

  /** Gives a tensor's buffer back to the pool (called by `Tensor.dispose`). */
  release(storage: unknown, bytes: number): void {
    this.memory.free(bytes);
    this.#hostValues.delete(storage as GPUBuffer);
    if (!this.#destroyed) this.pool.release(storage as GPUBuffer);
  }

  /** Whether {@linkcode DeviceCore.mark} can date points of the device's work. */
  get timed(): boolean {
    return this.#reads.timed;
  }

  /**
   * Host time minus device time, in ms: an upper bound on the true offset,
   * tight once marks are in use (see `_device_reads.ts`). NaN before any.
   */
  get hostMinusDevice(): number {
    return this.#reads.hostMinusDevice;
  }

  /**
   * A point in the device's command stream, after everything recorded so
   * far: resolves to the device's timestamp (ms) when it passed it, once a
   * later read or sync has drained the queue past it (so a mark costs no
   * wait of its own); undefined without the "timestamp-query" feature.
   * Add {@linkcode DeviceCore.hostMinusDevice} for host time. Rejects if
   * the backend is destroyed first.
   */
  mark(): Promise<number> | undefined {
    if (this.#destroyed) return undefined;
    return this.#reads.mark();
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
    this.pool.submitted();
    this.#reads.submitted();
  }

  /**
   * Submits the recorded work and waits until the GPU has finished it: a
   * fence through the read path (a tiny read-back after everything), which
   * also settles the marks and checks queued so far.
   */
  async sync(): Promise<void> {
    this.live();
    await this.#reads.read(null, 16);
  }

  /**
   * Refuses further work at once, waits for the work already recorded, then
   * releases the device and every buffer and waits until the device is lost.
   * An error that the waited-for work reported is thrown after the release.
   */
  async close(): Promise<void> {
    this.#closed = true;
    let failure: { error: unknown } | null = null;
    try {
      await this.#reads.read(null, 16);
    } catch (error) {
      failure = { error };
    }
    this.destroy();
    await this.device.lost;
    if (failure !== null) throw failure.error;
  }

  /** Releases the device and every buffer at once; the core is unusable after. */
  destroy(): void {
    if (this.#destroyed) return;
    this.flush();
    this.#destroyed = true;
    this.#reads.destroy();
    this.pool.trim();
    this.device.destroy();
  }

  // ---- internals ------------------------------------------------------------------

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
}
