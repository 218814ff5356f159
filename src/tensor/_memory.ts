/**
 * Memory accounting shared by every backend.
 *
 * @module
 */

import type { MemoryStats } from "./backend.ts";

/**
 * Counts the bytes a backend allocates and frees. Backends call `alloc` when
 * they create storage and `free` when `release` is called; users read the
 * `MemoryStats` side (`liveBytes`, `peakBytes`, `resetPeak`).
 */
export class MemoryTracker implements MemoryStats {
  #live = 0;
  #peak = 0;
  #allocs = 0;
  #frees = 0;

  /** Bytes of tensor storage currently allocated and not released. */
  get liveBytes(): number {
    return this.#live;
  }

  /** Highest `liveBytes` since creation or the last `resetPeak()`. */
  get peakBytes(): number {
    return this.#peak;
  }

  /** Number of allocations recorded so far. */
  get allocCount(): number {
    return this.#allocs;
  }

  /** Number of releases recorded so far. */
  get freeCount(): number {
    return this.#frees;
  }

  /** Sets `peakBytes` to the current `liveBytes`. */
  resetPeak(): void {
    this.#peak = this.#live;
  }

  /** Records an allocation of `bytes`. */
  alloc(bytes: number): void {
    this.#live += bytes;
    this.#allocs++;
    if (this.#live > this.#peak) this.#peak = this.#live;
  }

  /** Records the release of `bytes` allocated earlier. */
  free(bytes: number): void {
    // A release that exceeds what is live means a backend bug (double free);
    // failing loudly keeps the numbers the pipeline reports trustworthy.
    if (bytes > this.#live) {
      throw new RangeError(
        `memory accounting: freeing ${bytes} bytes but only ${this.#live} are live`,
      );
    }
    this.#live -= bytes;
    this.#frees++;
  }
}
