/**
 * Options of the CPU backend (`new CpuBackend(options)`), checked in one
 * place.
 *
 * @module
 */

import { describeValue } from "../../text/describe.ts";
import { nearestName } from "../../text/nearest.ts";

/** Bytes of disposed tensors' storage a CPU backend keeps for reuse by default: 256 MiB. */
export const DEFAULT_POOL_BYTES: number = 256 * 2 ** 20;

/**
 * Options of {@linkcode CpuBackend}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * const be = new CpuBackend({ threads: 1, poolBytes: 0 }); // one thread, no reuse
 * assert.equal(be.threads, 1);
 * be.close();
 * ```
 */
export interface CpuBackendOptions {
  /**
   * The exact reference mode (default false): Float32Array storage and
   * plain JavaScript loops that sum each product in f64, in order, on the
   * calling thread — what every fast kernel is tested against, and what
   * the backend was before its WebAssembly kernels. Fast mode sums in f32
   * (relative differences around 1e-6) and runs several times faster.
   */
  readonly exact?: boolean;
  /**
   * Threads a fast-mode kernel runs on, the calling one included (default
   * every core: `navigator.hardwareConcurrency`). The extra threads are
   * workers over the backend's shared memory, started at the first kernel
   * large enough to share, ended by `close()` (a script that never closes
   * still exits). Results are the same bits whatever the count. A
   * pipeline's ranks share the cores: each rank's backend gets
   * `max(1, floor(cores / (ranks × replicas)))`. Ignored in exact mode.
   */
  readonly threads?: number;
  /**
   * Which build of the fast kernels runs (default: `"relaxed"` where the
   * engine runs relaxed SIMD, else `"simd128"`). `"relaxed"` multiplies and
   * adds in one instruction, fused (one rounding) where the CPU has FMA;
   * `"simd128"` multiplies, then adds (two roundings), and so gives the
   * same bits on every machine: pick it when the ranks of one run (MPI
   * across hosts) have different CPUs and must agree bit for bit.
   */
  readonly simd?: "relaxed" | "simd128";
  /**
   * Bytes of disposed tensors' storage kept for the next tensors of the same
   * size (default {@linkcode DEFAULT_POOL_BYTES}, 256 MiB; 0 keeps none). Reuse spares
   * the allocations and garbage collections of a training step's repeated
   * shapes. In exact mode, past the limit the idle storage is dropped for
   * the collector; in fast mode (whose memory never shrinks) idle blocks
   * past it are merged with their free neighbours, to serve other sizes.
   */
  readonly poolBytes?: number;
}

/** Every option of {@linkcode CpuBackend}, checked, with defaults. */
export interface CheckedCpuBackendOptions {
  /** See {@linkcode CpuBackendOptions.exact}. */
  readonly exact: boolean;
  /** See {@linkcode CpuBackendOptions.threads}. */
  readonly threads: number;
  /** See {@linkcode CpuBackendOptions.poolBytes}. */
  readonly poolBytes: number;
  /** See {@linkcode CpuBackendOptions.simd}; undefined: the best this engine runs. */
  readonly simd: "relaxed" | "simd128" | undefined;
}

/** The number of cores this process may use (`navigator.hardwareConcurrency`, at least 1). */
export function coreCount(): number {
  const n = (globalThis.navigator as { hardwareConcurrency?: number } | undefined)
    ?.hardwareConcurrency;
  return typeof n === "number" && Number.isInteger(n) && n > 0 ? n : 1;
}

/**
 * Threads of each CPU backend when `ranks` of them (a pipeline's ranks, all
 * replicas) compute at once on this machine: `max(1, floor(cores /
 * ranks))`, so that they never use more threads in all than there are cores.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { coreCount, threadsPerRank } from "./backend_options.ts";
 * assert.equal(threadsPerRank(1), coreCount());
 * assert.ok(threadsPerRank(1000) === 1);
 * ```
 */
export function threadsPerRank(ranks: number): number {
  return Math.max(1, Math.floor(coreCount() / ranks));
}

/**
 * `options` checked, with their defaults.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkCpuBackendOptions, DEFAULT_POOL_BYTES } from "./backend_options.ts";
 * assert.equal(checkCpuBackendOptions({}).poolBytes, DEFAULT_POOL_BYTES);
 * assert.equal(checkCpuBackendOptions({ threads: 3 }).threads, 3);
 * assert.throws(() => checkCpuBackendOptions({ poolBytes: -1 }), RangeError);
 * assert.throws(() => checkCpuBackendOptions({ threads: 0 }), RangeError);
 * ```
 *
 * @throws {TypeError} When `options` is not an object, names an unknown
 * option, or an option has the wrong type.
 * @throws {RangeError} When `poolBytes` is not a non-negative integer or
 * `threads` not a positive integer.
 */
export function checkCpuBackendOptions(options: CpuBackendOptions): CheckedCpuBackendOptions {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`CpuBackend options must be an object, got ${describeValue(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN.includes(key)) {
      const near = nearestName(key, KNOWN);
      throw new TypeError(
        `unknown CpuBackend option ${JSON.stringify(key)}${
          near === undefined ? "" : `; did you mean ${JSON.stringify(near)}?`
        } (options: ${KNOWN.join(", ")})`,
      );
    }
  }
  const exact: unknown = options.exact ?? false;
  if (typeof exact !== "boolean") {
    throw new TypeError(`CpuBackend: exact must be true or false, got ${describeValue(exact)}`);
  }
  const threads: unknown = options.threads ?? coreCount();
  if (typeof threads !== "number") {
    throw new TypeError(
      `CpuBackend: threads must be a number of threads, got ${describeValue(threads)}`,
    );
  }
  if (!Number.isInteger(threads) || threads < 1 || threads > 1024) {
    throw new RangeError(
      `CpuBackend: threads must be an integer from 1 to 1024, got ${threads}`,
    );
  }
  const simd: unknown = options.simd;
  if (simd !== undefined && simd !== "relaxed" && simd !== "simd128") {
    throw new RangeError(
      `CpuBackend: simd must be "relaxed" or "simd128", got ${describeValue(simd)}`,
    );
  }
  return { exact, threads, simd, poolBytes: checkPoolBytes(options) };
}

function checkPoolBytes(options: CpuBackendOptions): number {
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

const KNOWN: readonly string[] = ["exact", "threads", "simd", "poolBytes"];
