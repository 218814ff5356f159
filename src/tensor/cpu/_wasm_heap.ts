/**
 * The storage of the fast CPU backend's tensors: one shared WebAssembly
 * memory, where the kernels read and write them in place, and an allocator
 * of its blocks.
 *
 * Blocks are 64-byte aligned, sized in multiples of 64 bytes. A released
 * block goes to an idle list by its size and the next tensor of that size
 * takes it (a training step allocates the same shapes again and again).
 * New blocks come from the top of the heap, growing the memory when
 * needed. A WebAssembly memory never shrinks and holds at most 4 GiB: when
 * growth fails, or the idle bytes pass the pool limit, the idle blocks are
 * merged with their free neighbours (those at the top lower it) and a
 * request takes the first merged block that fits. Memory past the
 * highest byte ever used is still zero and is not cleared again.
 *
 * @module
 */

import type { BufferPoolStats } from "../backend.ts";

import { WASM_MEMORY_LIMIT } from "./wasm_memory_limit.ts";

const PAGE = 65536;
const ALIGN = 64;

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

/** A shared WebAssembly memory and the allocator of its heap. */
export class WasmHeap {
  /** The memory every thread's kernels use. */
  readonly memory: WebAssembly.Memory;
  readonly #base: number;
  readonly #maxIdle: number;
  readonly #idle = new Map<number, number[]>();
  #top: number;
  #dirtyTop: number;
  #idleBytes = 0;
  #idleAfterMerge = 0;
  #created = 0;
  #reused = 0;
  #buffer: SharedArrayBuffer;

  /**
   * A heap starting at `base` (the module's `__heap_base`), keeping up to
   * `maxIdleBytes` of released blocks idle before merging them.
   */
  constructor(base: number, maxIdleBytes: number) {
    this.#base = roundUp(base, ALIGN);
    this.#top = this.#dirtyTop = this.#base;
    this.#maxIdle = maxIdleBytes;
    this.memory = new WebAssembly.Memory({
      initial: Math.ceil((this.#base + (1 << 20)) / PAGE),
      maximum: WASM_MEMORY_LIMIT / PAGE,
      shared: true,
    });
    this.#buffer = this.memory.buffer as unknown as SharedArrayBuffer;
  }

  /** Pool statistics, as `Backend.pool` reports them. */
  get stats(): BufferPoolStats {
    return {
      allocatedBytes: this.#top - this.#base,
      idleBytes: this.#idleBytes,
      created: this.#created,
      reused: this.#reused,
    };
  }

  /** Bytes of the memory now (the heap and the module's stack). */
  get memoryBytes(): number {
    return this.#buffer.byteLength;
  }

  /**
   * A block of at least `bytes` bytes: its address. Zeroed when `zero`,
   * else holding stale values the caller overwrites.
   *
   * @throws {RangeError} When the memory's 4 GiB cannot hold it.
   */
  alloc(bytes: number, zero: boolean): number {
    const size = roundUp(Math.max(bytes, 1), ALIGN);
    const hit = this.#idle.get(size)?.pop();
    let at: number;
    if (hit !== undefined) {
      this.#idleBytes -= size;
      this.#reused++;
      at = hit;
    } else {
      at = this.#fresh(size);
      this.#created++;
    }
    if (zero && at < this.#dirtyTop) {
      new Uint8Array(this.#buffer, at, Math.min(size, this.#dirtyTop - at)).fill(0);
    }
    if (at + size > this.#dirtyTop) this.#dirtyTop = at + size;
    return at;
  }

  /** Takes back the block at `at` of `bytes` bytes (as asked of `alloc`). */
  free(at: number, bytes: number): void {
    const size = roundUp(Math.max(bytes, 1), ALIGN);
    let list = this.#idle.get(size);
    if (list === undefined) this.#idle.set(size, list = []);
    list.push(at);
    this.#idleBytes += size;
    // Past the limit, merge; but not again until the idle bytes have
    // doubled since (merged blocks that fit nothing stay idle).
    if (this.#idleBytes > this.#maxIdle && this.#idleBytes > 2 * this.#idleAfterMerge) {
      this.#merge();
    }
  }

  /** A Float32Array over `length` values at `at`. */
  f32(at: number, length: number): Float32Array {
    return new Float32Array(this.#buffer, at, length);
  }

  /** The memory's current buffer (it changes when the memory grows). */
  get buffer(): SharedArrayBuffer {
    return this.#buffer;
  }

  // A block from the top of the heap (growing the memory), else from the
  // merged idle blocks.
  #fresh(size: number): number {
    if (this.#ensure(this.#top + size)) {
      const at = this.#top;
      this.#top += size;
      return at;
    }
    this.#merge();
    for (const [blockSize, list] of this.#idle) {
      if (blockSize < size || list.length === 0) continue;
      const at = list.pop()!;
      this.#idleBytes -= blockSize;
      if (blockSize > size) this.free(at + size, blockSize - size);
      return at;
    }
    if (this.#ensure(this.#top + size)) {
      const at = this.#top;
      this.#top += size;
      return at;
    }
    throw new RangeError(
      `CPU backend: a tensor of ${size} bytes does not fit: its tensors live in one ` +
        `WebAssembly memory, which holds at most 4 GiB (${WASM_MEMORY_LIMIT} bytes), and ` +
        `${this.#top - this.#base - this.#idleBytes} bytes are in use; use smaller ` +
        `micro-batches or more stages, or new CpuBackend({ exact: true }), whose tensors ` +
        `live in JavaScript memory`,
    );
  }

  // Whether the memory reaches `end` bytes, growing it if needed.
  #ensure(end: number): boolean {
    if (end <= this.#buffer.byteLength) return true;
    if (end > WASM_MEMORY_LIMIT) return false;
    const pages = Math.max(
      Math.ceil((end - this.#buffer.byteLength) / PAGE),
      // Grow by at least an eighth, so that a growing heap grows rarely.
      Math.min(Math.ceil(this.#buffer.byteLength / 8 / PAGE), WASM_MEMORY_LIMIT / PAGE),
    );
    try {
      this.memory.grow(Math.min(pages, (WASM_MEMORY_LIMIT - this.#buffer.byteLength) / PAGE));
    } catch {
      try {
        this.memory.grow(Math.ceil((end - this.#buffer.byteLength) / PAGE));
      } catch {
        return false;
      }
    }
    this.#buffer = this.memory.buffer as unknown as SharedArrayBuffer;
    return end <= this.#buffer.byteLength;
  }

  // Merges every idle block with its idle neighbours; the run ending at the
  // top lowers the top.
  #merge(): void {
    const blocks: [number, number][] = [];
    for (const [size, list] of this.#idle) for (const at of list) blocks.push([at, size]);
    this.#idle.clear();
    this.#idleBytes = 0;
    blocks.sort((a, b) => a[0] - b[0]);
    const merged: [number, number][] = [];
    for (const [at, size] of blocks) {
      const last = merged[merged.length - 1];
      if (last !== undefined && last[0] + last[1] === at) last[1] += size;
      else merged.push([at, size]);
    }
    const last = merged[merged.length - 1];
    if (last !== undefined && last[0] + last[1] === this.#top) {
      this.#top = last[0];
      merged.pop();
    }
    for (const [at, size] of merged) {
      let list = this.#idle.get(size);
      if (list === undefined) this.#idle.set(size, list = []);
      list.push(at);
      this.#idleBytes += size;
    }
    this.#idleAfterMerge = this.#idleBytes;
  }

  /** Merges every idle block (for `close`: nothing else to release). */
  trim(): void {
    this.#merge();
  }
}
