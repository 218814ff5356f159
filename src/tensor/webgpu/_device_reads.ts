/**
 * The device core's read-backs (see `_readback.ts` for how a map is read):
 *
 * - `read`: a tensor's data through a staging buffer, right after a submit;
 *   with no source, a fence (`sync()`): a tiny read-back after everything.
 * - `later`: a read whose data nothing waits for now (the device's index
 *   checks): queued, and mapped by the next read or fence after its submit,
 *   which then reports what it found; it never blocks the thread on its own.
 * - `mark`: a timestamp in the command stream, read the same way.
 * - Host time: once marks are in use, every read also stamps the device's
 *   time after its copy; the smallest (observed − stamp) bounds the offset
 *   between host and device clocks from above, tightly, since the read
 *   returns as soon as the queue has drained.
 *
 * Not exported from the package.
 *
 * @module
 */

import {
  detectReadPath,
  type MappedRange,
  mapRead,
  type ReadPath,
  StagingPool,
} from "./_readback.ts";

// Query slots for time marks, reused in turn (a mark is read back long before its slot returns).
const QUERY_SLOTS = 1024;

/** What the reads need of the device core. */
export interface ReadHost {
  /** The command encoder being recorded, outside any compute pass. */
  encoder(): GPUCommandEncoder;
  /** Submits the recorded work now. */
  flush(): void;
  /** Throws (and forgets) an error the device reported. */
  throwPending(): void;
}

// A read-back that waits for a later read or fence to drain the queue.
interface LaterRead {
  readonly staging: GPUBuffer;
  readonly bytes: number;
  readonly then: (data: ArrayBuffer) => void;
  readonly fail: (e: unknown) => void;
}

/** Read-backs, marks and host-time calibration of one device. */
export class DeviceReads {
  /** How this device's maps complete. */
  readonly path: ReadPath;
  readonly #host: ReadHost;
  readonly #staging: StagingPool;
  // Time marks (with the "timestamp-query" feature): a query slot per mark,
  // resolved into 256-byte-aligned slots, copied into a staging buffer.
  readonly #queries: GPUQuerySet | null;
  readonly #queryResolve: GPUBuffer | null;
  #nextQuery = 0;
  // Whether a mark was asked for: from then on reads calibrate host time.
  #marked = false;
  // Host time (performance.now) minus device time, as tight as observed so far.
  #hostMinusDevice = Infinity;
  // Later reads: recorded, then submitted (mappable once a read drains the queue).
  #recorded: LaterRead[] = [];
  #submitted: LaterRead[] = [];

  /** Reads for `device`; `readPath` `"awaited"` never takes the immediate path. */
  constructor(
    device: GPUDevice,
    host: ReadHost,
    readPath: "auto" | "awaited",
    maxIdleBytes: number,
  ) {
    if (readPath !== "auto" && readPath !== "awaited") {
      throw new RangeError(
        `readPath must be "auto" or "awaited", got ${JSON.stringify(readPath)}`,
      );
    }
    this.#host = host;
    this.#staging = new StagingPool(device, maxIdleBytes);
    this.path = readPath === "awaited" ? "awaited" : detectReadPath(device);
    const timed = device.features.has("timestamp-query");
    this.#queries = timed ? device.createQuerySet({ type: "timestamp", count: QUERY_SLOTS }) : null;
    this.#queryResolve = timed
      ? device.createBuffer({
        size: QUERY_SLOTS * 256,
        usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
      })
      : null;
  }

  /** Whether {@linkcode DeviceReads.mark} can date points of the device's work. */
  get timed(): boolean {
    return this.#queries !== null;
  }

  /**
   * Host time minus device time, in ms: the smallest (observed − device)
   * over the stamps read back so far, an upper bound on the true offset.
   * NaN before the first.
   */
  get hostMinusDevice(): number {
    return Number.isFinite(this.#hostMinusDevice) ? this.#hostMinusDevice : NaN;
  }

  /**
   * Copies `bytes` of `src` out after everything recorded so far (no
   * source: a fence, which only waits): the data itself where the map
   * completes within the call, else a promise of it. Maps the later reads
   * it drained past, then throws a pending device error, if any.
   */
  read(src: GPUBuffer | null, bytes: number): Float32Array | Promise<Float32Array> {
    const stampAt = this.#marked ? Math.ceil(bytes / 8) * 8 : -1;
    const total = stampAt >= 0 ? stampAt + 8 : bytes;
    const staging = this.#staging.acquire(total);
    const enc = this.#host.encoder();
    if (src !== null) enc.copyBufferToBuffer(src, 0, staging, 0, bytes);
    else enc.clearBuffer(staging, 0, bytes);
    if (stampAt >= 0) this.#stamp(staging, stampAt);
    this.#host.flush();
    // The later reads submitted so far first, so that this read reports their checks.
    const later = this.#drain();
    const take = (range: MappedRange): Float32Array => {
      if (stampAt >= 0) this.#observe(new BigInt64Array(range(stampAt, 8))[0]);
      return src === null ? new Float32Array(0) : new Float32Array(range(0, bytes));
    };
    const done = (data: Float32Array): Float32Array => {
      this.#staging.release(staging);
      this.#host.throwPending();
      return data;
    };
    const failed = (e: unknown): never => {
      this.#host.throwPending();
      throw e;
    };
    let got: Float32Array | Promise<Float32Array>;
    try {
      got = mapRead(staging, total, this.path, take);
    } catch (e) {
      return failed(e);
    }
    if (got instanceof Promise) {
      return (later === undefined ? got : later.then(() => got)).then(done, failed);
    }
    return later === undefined ? done(got) : later.then(() => done(got), failed);
  }

  /**
   * Copies `bytes` of `src` out without waiting: `then` gets the data once
   * a later read or fence has drained the queue past it (not at all if the
   * device goes first).
   */
  later(src: GPUBuffer, bytes: number, then: (data: ArrayBuffer) => void): void {
    const staging = this.#staging.acquire(bytes);
    this.#host.encoder().copyBufferToBuffer(src, 0, staging, 0, bytes);
    this.#recorded.push({ staging, bytes, then, fail: () => {} });
  }

  /**
   * A point in the command stream after everything recorded so far:
   * resolves to the device's timestamp (ms) when it passed it, once a later
   * read or fence has drained the queue past it (a mark never waits on its
   * own); undefined without timestamps. Rejects if the device goes first.
   */
  mark(): Promise<number> | undefined {
    if (this.#queries === null) return undefined;
    this.#marked = true;
    const staging = this.#staging.acquire(8);
    this.#stamp(staging, 0);
    return new Promise<number>((resolve, reject) => {
      this.#recorded.push({
        staging,
        bytes: 8,
        then: (data) => resolve(Number(new BigInt64Array(data)[0]) / 1e6),
        fail: reject,
      });
    });
  }

  /** Called after each queue submit: the later reads recorded so far were submitted. */
  submitted(): void {
    if (this.#recorded.length === 0) return;
    this.#submitted.push(...this.#recorded);
    this.#recorded = [];
  }

  /** Fails the later reads still queued and destroys the idle staging buffers. */
  destroy(): void {
    const gone = new Error("WebGPU backend destroyed before the read-back");
    const left = [...this.#submitted, ...this.#recorded];
    this.#submitted = [];
    this.#recorded = [];
    for (const r of left) r.fail(gone);
    this.#staging.trim();
  }

  // Records the device's timestamp into `staging` at byte `at` (a multiple of 8).
  #stamp(staging: GPUBuffer, at: number): void {
    const queries = this.#queries!;
    const resolved = this.#queryResolve!;
    const enc = this.#host.encoder();
    const i = this.#nextQuery;
    this.#nextQuery = (i + 1) % QUERY_SLOTS;
    enc.beginComputePass({ timestampWrites: { querySet: queries, beginningOfPassWriteIndex: i } })
      .end();
    enc.resolveQuerySet(queries, i, 1, resolved, i * 256);
    enc.copyBufferToBuffer(resolved, i * 256, staging, at, 8);
  }

  // A stamp read back just now: host time then was at most now.
  #observe(deviceNs: bigint): void {
    const observed = performance.now();
    this.#hostMinusDevice = Math.min(this.#hostMinusDevice, observed - Number(deviceNs) / 1e6);
  }

  // Maps the later reads whose copies were submitted (right after a submit,
  // so the first map waits for the queue and the rest are immediate):
  // undefined when every one was handled at once, else a promise that
  // settles once every one has been (never rejecting: failures go to them).
  #drain(): Promise<void> | undefined {
    const due = this.#submitted;
    if (due.length === 0) return undefined;
    this.#submitted = [];
    const waits: Promise<void>[] = [];
    for (const r of due) {
      let got: ArrayBuffer | Promise<ArrayBuffer>;
      try {
        got = mapRead(r.staging, r.bytes, this.path, (range) => range(0, r.bytes));
      } catch (e) {
        r.fail(e);
        continue;
      }
      const done = (data: ArrayBuffer) => {
        this.#staging.release(r.staging);
        r.then(data);
      };
      if (got instanceof Promise) waits.push(got.then(done, r.fail));
      else done(got);
    }
    return waits.length === 0 ? undefined : Promise.all(waits).then(() => {});
  }
}
