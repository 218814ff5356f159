/**
 * Reuse of Float32Arrays for the CPU backend.
 *
 * A training step allocates the same shapes micro-batch after micro-batch.
 * Fresh arrays each time cost more than their zeroing: their memory is
 * allocated outside V8's heap, each new one is a page-faulted mapping when
 * large, and the growth of that memory triggers garbage collections whose
 * helper threads take cores from the ranks (measured: a (D, P) = (2, 1) step
 * of the tiny GPT gave V8's helpers 45–55 ms of CPU per step without reuse,
 * 20–26 ms with it). So a disposed tensor's array goes to an idle list keyed
 * by its length, and the next tensor of that length takes it.
 *
 * Safe because storage never leaves the backend: ops read and write it
 * synchronously, reads copy it out, and the tensor's storage is released
 * only once every view of it is disposed.
 *
 * @module
 */

import type { BufferPoolStats } from "../backend.ts";

// Arrays of at most this many bytes live on V8's heap: nothing to save.
const MIN_POOLED_BYTES = 64;

/** Float32Arrays by length, kept idle up to a byte limit. */
export class ArrayPool {
  readonly #maxIdleBytes: number;
  readonly #idleLists = new Map<number, Float32Array[]>();
  #allocated = 0;
  #idle = 0;
  #created = 0;
  #reused = 0;

  /** A pool keeping at most `maxIdleBytes` idle (0: none, every array is new). */
  constructor(maxIdleBytes: number) {
    this.#maxIdleBytes = maxIdleBytes;
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
   * An array of `length` values: idle storage of that length when there is
   * some (zeroed when `zero`, else holding stale values the caller
   * overwrites), or a new one (always zeros).
   */
  acquire(length: number, zero: boolean): Float32Array {
    const hit = this.#idleLists.get(length)?.pop();
    if (hit !== undefined) {
      this.#idle -= hit.byteLength;
      this.#reused++;
      return zero ? hit.fill(0) : hit;
    }
    const a = new Float32Array(length);
    if (a.byteLength > MIN_POOLED_BYTES) {
      this.#created++;
      this.#allocated += a.byteLength;
    }
    return a;
  }

  /**
   * Takes back an array no tensor uses any more. Past the idle limit the
   * idle arrays are all dropped first (shapes of an earlier phase give way
   * to the current ones); an array larger than the limit is dropped itself.
   */
  release(a: Float32Array): void {
    const bytes = a.byteLength;
    // Small arrays were never counted; a detached one (byteLength 0) neither.
    if (bytes <= MIN_POOLED_BYTES) return;
    if (bytes > this.#maxIdleBytes) {
      this.#allocated -= bytes;
      return;
    }
    if (this.#idle + bytes > this.#maxIdleBytes) this.trim();
    let list = this.#idleLists.get(a.length);
    if (list === undefined) this.#idleLists.set(a.length, list = []);
    list.push(a);
    this.#idle += bytes;
  }

  /** Drops every idle array (for the garbage collector to free). */
  trim(): void {
    this.#allocated -= this.#idle;
    this.#idle = 0;
    this.#idleLists.clear();
  }
}
