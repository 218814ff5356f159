/**
 * Options of the CPU backend (`new CpuBackend(options)`), checked in one
 * place.
 *
 * @module
 */

import { describeValue } from "../../text/describe.ts";

/** Bytes of disposed tensors' storage a CPU backend keeps for reuse by default: 256 MiB. */
export const DEFAULT_POOL_BYTES: number = 256 * 2 ** 20;

/**
 * Options of {@linkcode CpuBackend}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * const be = new CpuBackend({ poolBytes: 0 }); // no reuse: every tensor's storage is new
 * be.zeros([1024]).dispose();
 * assert.equal(be.pool.idleBytes, 0);
 * ```
 */
export interface CpuBackendOptions {
  /**
   * Bytes of disposed tensors' storage kept for the next tensors of the same
   * size (default {@linkcode DEFAULT_POOL_BYTES}, 256 MiB; 0 keeps none). Reuse spares
   * the allocations and garbage collections of a training step's repeated
   * shapes; past the limit the idle storage is dropped for the collector.
   * Tensors of at most 16 values (64 bytes) are neither kept nor counted in
   * `CpuBackend.pool`: V8 keeps such arrays on its own heap. A backend of
   * your own only: the ranks of a `PipelineParallelModel` create theirs
   * with the default.
   */
  readonly poolBytes?: number;
}

/**
 * The pool limit `options` give, after checking them.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkPoolBytes, DEFAULT_POOL_BYTES } from "./backend_options.ts";
 * assert.equal(checkPoolBytes({}), DEFAULT_POOL_BYTES);
 * assert.throws(() => checkPoolBytes({ poolBytes: -1 }), RangeError);
 * ```
 *
 * @throws {TypeError} When `options` is not an object, names an unknown
 * option, or `poolBytes` is not a number.
 * @throws {RangeError} When `poolBytes` is not a non-negative integer.
 */
export function checkPoolBytes(options: CpuBackendOptions): number {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`CpuBackend options must be an object, got ${describeValue(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN.includes(key)) {
      const near = KNOWN.find((k) => k.toLowerCase() === key.toLowerCase());
      throw new TypeError(
        `unknown CpuBackend option ${JSON.stringify(key)}${
          near === undefined ? "" : `; did you mean ${JSON.stringify(near)}?`
        } (options: ${KNOWN.join(", ")})`,
      );
    }
  }
  if (options.poolBytes === undefined) return DEFAULT_POOL_BYTES;
  const poolBytes: unknown = options.poolBytes;
  if (typeof poolBytes !== "number") {
    throw new TypeError(
      `poolBytes must be a number of bytes, got ${
        typeof poolBytes === "string"
          ? `the string ${JSON.stringify(poolBytes)}`
          : describeValue(poolBytes)
      }`,
    );
  }
  if (!Number.isSafeInteger(poolBytes) || poolBytes < 0) {
    throw new RangeError(
      `poolBytes must be a non-negative integer (bytes kept for reuse), got ${poolBytes}`,
    );
  }
  return poolBytes;
}

const KNOWN: readonly string[] = ["poolBytes"];
