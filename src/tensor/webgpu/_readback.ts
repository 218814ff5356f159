/**
 * Read-backs: the one place where the WebGPU backend maps buffers for
 * reading. Tensor reads, pipeline hand-overs, losses, the device's index
 * checks, time marks and `sync()` all come through {@linkcode mapRead}.
 *
 * Why not just `await buffer.mapAsync()`: in Deno 2.9 (`ext/webgpu`,
 * `buffer.rs` and `queue.rs`) `mapAsync` and `onSubmittedWorkDone` loop
 * `while !done { device_poll(wait); sleep(10 ms) }`. Deno polls an async op
 * once when it is called; in that first poll `device_poll(wait)` blocks the
 * calling thread until the queue has drained and fires the map callback, but
 * the loop tests `done` only before polling, so the promise always settles
 * 10 ms later. The data is ready when `mapAsync()` returns, so the read path
 * calls `getMappedRange()` right after it, without awaiting.
 *
 * Hazards, and how this module meets them:
 * - `getMappedRange()` on a buffer whose map mode Deno does not know yet
 *   (never mapped before) panics Deno: an `unwrap` on `None`, which kills the
 *   process and cannot be caught. Deno knows a mode from `mappedAtCreation`
 *   on, so every staging buffer is created mapped and unmapped at once
 *   ({@linkcode createStagingBuffer}, the only way {@linkcode StagingPool}
 *   makes one), and {@linkcode mapRead} takes only those.
 * - A buffer whose map is not done yet (another Deno, another platform, a
 *   later Deno that moves the wait off the thread) makes `getMappedRange()`
 *   throw a catchable `OperationError`: then the promise is awaited, so the
 *   read stays correct, only slower. A Deno that checks before sleeping
 *   makes the awaited path fast too; the immediate path still works.
 * - The pending promise settles ~10 ms later and sets `mapState` to
 *   "mapped" although the buffer was unmapped: `mapState` is not consulted,
 *   and the promise gets a `.catch` so a late rejection is not unhandled.
 * - The `mapAsync()` call itself blocks its thread until the queue drains,
 *   on a real GPU too: callers map only when they need the data, never as a
 *   prefetch (the device core queues checks and marks until a read or a
 *   sync has drained the queue anyway).
 *
 * Whether the immediate path works is detected once per device
 * ({@linkcode detectReadPath}, Deno only); every read still falls back to
 * awaiting when the data turns out not to be there.
 *
 * Not exported from the package.
 *
 * @module
 */

import { BufferPool } from "./_pool.ts";

/** MAP_READ | COPY_DST: the usage of every staging buffer. */
export const STAGING_USAGE = 0x0001 | 0x0008;

/**
 * How a device's read-backs complete: `"immediate"` when the data is there
 * as soon as `mapAsync()` returns (Deno 2.9), `"awaited"` when the map's
 * promise must settle first.
 */
export type ReadPath = "immediate" | "awaited";

/**
 * A staging buffer of `bytes` (a multiple of 4) that Deno can safely map
 * for reading: created mapped, unmapped at once.
 */
export function createStagingBuffer(device: GPUDevice, bytes: number): GPUBuffer {
  const b = device.createBuffer({ size: bytes, usage: STAGING_USAGE, mappedAtCreation: true });
  b.unmap();
  return b;
}

/** Staging buffers for read-backs, bucketed by size, each made by {@linkcode createStagingBuffer}. */
export class StagingPool {
  readonly #pool: BufferPool;

  /** A pool for `device` keeping at most `maxIdleBytes` of idle buffers. */
  constructor(device: GPUDevice, maxIdleBytes: number) {
    this.#pool = new BufferPool(
      device,
      STAGING_USAGE,
      maxIdleBytes,
      (size) => createStagingBuffer(device, size),
    );
  }

  /** A staging buffer of at least `bytes`, unmapped, used by no queued command. */
  acquire(bytes: number): GPUBuffer {
    return this.#pool.acquire(bytes, true);
  }

  /** Returns a buffer that is unmapped and used by no queued or recorded command. */
  release(b: GPUBuffer): void {
    this.#pool.releaseIdle(b);
  }

  /** Destroys every idle buffer. */
  trim(): void {
    this.#pool.trim();
  }
}

// Deno returns a view of the mapped memory (detached at unmap) while it
// takes a buffer's map mode to be the one it was created mapped with, and a
// copy of its own once a read map of it has settled. Copies need no second
// copy here: in this thread, `rangesAreCopies` turns true once a probe has
// seen that (see detectReadPath), and `settled` holds the buffers whose
// read map has settled.
let rangesAreCopies = false;
const settled = new WeakSet<GPUBuffer>();

function isNotMappedYet(e: unknown): boolean {
  return e instanceof Error && e.name === "OperationError";
}

/** Copies `size` bytes at `offset` out of a mapped buffer. */
export type MappedRange = (offset: number, size: number) => ArrayBuffer;

/**
 * Maps the first `bytes` of `staging` (from a {@linkcode StagingPool}, its
 * copies already submitted) for reading, lets `take` copy what it needs out
 * of them, and leaves the buffer unmapped: `take`'s result itself when
 * `path` is `"immediate"` and the map completed within the `mapAsync()`
 * call, else a promise of it.
 */
export function mapRead<T>(
  staging: GPUBuffer,
  bytes: number,
  path: ReadPath,
  take: (range: MappedRange) => T,
): T | Promise<T> {
  const mapped = staging.mapAsync(GPUMapMode.READ, 0, bytes);
  mapped.then(() => settled.add(staging), () => {});
  const range: MappedRange = (offset, size) => {
    const r = staging.getMappedRange(offset, size);
    return rangesAreCopies && settled.has(staging) ? r : r.slice(0);
  };
  if (path === "immediate") {
    // The promise settles later (Deno's sleep) or not at all: nothing else waits for it.
    mapped.catch(() => {});
    let ready = false;
    try {
      staging.getMappedRange(0, 4);
      ready = true;
    } catch (e) {
      if (!isNotMappedYet(e)) throw e;
    }
    if (ready) {
      try {
        return take(range);
      } finally {
        staging.unmap();
      }
    }
  }
  return mapped.then(() => {
    try {
      return take(range);
    } finally {
      staging.unmap();
    }
  });
}

/**
 * Whether `device`'s maps complete within the `mapAsync()` call: tried once
 * on a fresh staging buffer after an empty submit. Deno only; elsewhere
 * (and when the try finds the data not there) `"awaited"`.
 */
export function detectReadPath(device: GPUDevice): ReadPath {
  if (!("Deno" in globalThis)) return "awaited";
  const probe = createStagingBuffer(device, 16);
  const enc = device.createCommandEncoder();
  enc.clearBuffer(probe, 0, 16);
  device.queue.submit([enc.finish()]);
  const got = mapRead(probe, 16, "immediate", () => undefined);
  if (!(got instanceof Promise)) {
    probeRangeCopies(device, probe);
    return "immediate";
  }
  got.then(() => probe.destroy(), () => probe.destroy());
  return "awaited";
}

// Once the probe's first map has settled (Deno's sleep), maps it again and
// sees whether a range of it outlives the unmap: then Deno copies ranges of
// buffers whose read map has settled, and reads skip their own copy.
function probeRangeCopies(device: GPUDevice, probe: GPUBuffer): void {
  if (rangesAreCopies) {
    probe.destroy();
    return;
  }
  const again = () => {
    try {
      probe.unmap();
      const enc = device.createCommandEncoder();
      enc.clearBuffer(probe, 0, 16);
      device.queue.submit([enc.finish()]);
      const p = probe.mapAsync(GPUMapMode.READ, 0, 16);
      p.catch(() => {});
      const r = probe.getMappedRange(0, 16);
      probe.unmap();
      rangesAreCopies = r.byteLength === 16;
    } catch {
      // Not immediate this time: keep copying.
    } finally {
      probe.destroy();
    }
  };
  // (A device destroyed meanwhile makes any of it throw: caught in `again`.)
  probe.mapAsync(GPUMapMode.READ, 0, 16).then(again, () => probe.destroy());
}
