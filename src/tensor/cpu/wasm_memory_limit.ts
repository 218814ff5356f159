/**
 * The most a fast-mode CPU backend's tensors can hold.
 *
 * @module
 */

/**
 * Bytes one WebAssembly memory (32-bit addresses) holds: 4 GiB. A fast-mode
 * CPU backend keeps every tensor in one such memory; a tensor past it is
 * refused with a RangeError naming the limit.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { WASM_MEMORY_LIMIT } from "./wasm_memory_limit.ts";
 * assert.equal(WASM_MEMORY_LIMIT, 4 * 2 ** 30);
 * ```
 */
export const WASM_MEMORY_LIMIT: number = 2 ** 32;
