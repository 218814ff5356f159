/**
 * Size-bucketed reuse of GPU buffers for the WebGPU backend.
 *
 * Hazards. Commands recorded in one command encoder run in order, but
 * `queue.writeBuffer` runs at the point it is called on the queue timeline,
 * before any command that is still being recorded. So a buffer released while
 * recorded-but-unsubmitted commands still read it:
 * - may be handed out again at once as the *output of a later command* in the
 *   same stream (its writes are ordered after those reads), and
 * - must not be handed out to anything that fills it with `writeBuffer`
 *   until those commands have been submitted.
 * The pool keeps the two apart: `release` puts a buffer on the "recycled"
 * list, `submitted()` (called after every queue submit) moves recycled
 * buffers to the "free" list, and `acquire(bytes, viaQueue)` takes from the
 * free list only when the caller will write with the queue.
 *
 * @module
 */

import type { BufferPoolStats } from "../backend.ts";

export type { BufferPoolStats };

const MIN_BYTES = 16;

/**
 * Capacity of the bucket holding `bytes`: powers of two up to 64 KiB, then
 * eight steps per power of two (at most 12.5 % waste) to keep large
 * activations from doubling.
 */
export function bucketBytes(bytes: number): number {
  const b = Math.max(MIN_BYTES, Math.ceil(bytes / 16) * 16);
  const p = 2 ** Math.ceil(Math.log2(b));
  if (p <= 65536) return p;
  const step = p / 16;
  return Math.ceil(b / step) * step;
}

/** A pool of GPU buffers of one usage, bucketed by capacity. */
export class BufferPool {
  readonly #maxIdleBytes: number;
  readonly #create: (bytes: number) => GPUBuffer;
  #free = new Map<number, GPUBuffer[]>();
  #recycled: GPUBuffer[] = [];
  #allocated = 0;
  #idle = 0;
  #created = 0;
  #reused = 0;

  /**
   * A pool of `usage` buffers keeping at most `maxIdleBytes` idle; `create`
   * makes a new buffer of a bucket's size (default: `device.createBuffer`).
   */
  constructor(
    device: GPUDevice,
    usage: number,
    maxIdleBytes: number,
    create?: (bytes: number) => GPUBuffer,
  ) {
    this.#maxIdleBytes = maxIdleBytes;
    this.#create = create ?? ((size) => device.createBuffer({ size, usage }));
  }

  /** Current statistics. */
  get stats(): BufferPoolStats {
    return {
      allocatedBytes: this.#allocated,
      idleBytes: this.#idle,
      created: this.#created,
      reused: this.#reused,
    };
  }

  /**
   * A buffer of at least `bytes`. With `viaQueue` the caller will fill it
   * with `queue.writeBuffer` (or map it), so only buffers whose earlier users
   * were all submitted qualify; otherwise a buffer released since the last
   * submit may be returned too.
   */
  acquire(bytes: number, viaQueue: boolean): GPUBuffer {
    const cap = bucketBytes(bytes);
    if (!viaQueue) {
      const i = this.#recycled.findIndex((b) => b.size === cap);
      if (i >= 0) {
        const buf = this.#recycled[i];
        this.#recycled[i] = this.#recycled[this.#recycled.length - 1];
        this.#recycled.pop();
        this.#idle -= cap;
        this.#reused++;
        return buf;
      }
    }
    const list = this.#free.get(cap);
    const hit = list?.pop();
    if (hit !== undefined) {
      this.#idle -= cap;
      this.#reused++;
      return hit;
    }
    this.#created++;
    this.#allocated += cap;
    return this.#create(cap);
  }

  /** Returns a buffer; see the module notes for when it can be reused. */
  release(buf: GPUBuffer): void {
    this.#recycled.push(buf);
    this.#idle += buf.size;
  }

  /** Returns a buffer that no queued or recorded command uses any more. */
  releaseIdle(buf: GPUBuffer): void {
    this.#idle += buf.size;
    this.#toFree(buf);
  }

  /** Called after a queue submit: recycled buffers become free. */
  submitted(): void {
    for (const b of this.#recycled) this.#toFree(b);
    this.#recycled = [];
  }

  #toFree(buf: GPUBuffer): void {
    // Past the idle cap, give memory back instead of hoarding it.
    if (this.#idle > this.#maxIdleBytes) {
      this.#idle -= buf.size;
      this.#allocated -= buf.size;
      buf.destroy();
      return;
    }
    let list = this.#free.get(buf.size);
    if (list === undefined) this.#free.set(buf.size, list = []);
    list.push(buf);
  }

  /** Destroys every idle buffer. */
  trim(): void {
    // Recycled buffers may still be read by unsubmitted commands: keep them.
    for (const list of this.#free.values()) {
      for (const b of list) {
        this.#idle -= b.size;
        this.#allocated -= b.size;
        b.destroy();
      }
    }
    this.#free.clear();
  }
}
