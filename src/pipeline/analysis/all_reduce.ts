import { describeValue } from "../../text/describe.ts";
/**
 * The cost of averaging a stage's gradients over its D data-parallel
 * replicas, and the spans the simulator reports for it.
 *
 * @module
 */

/**
 * A link as the simulator's all-reduce takes it: one message of `n` bytes
 * takes `latencyMs + n / bytesPerMs` ms. A `LinkModel` from `measureLink`
 * or `linkFromSamples` is one.
 */
export interface AllReduceLink {
  /** One-way time of a minimal message, in ms (α). */
  readonly latencyMs: number;
  /** Bytes per ms of a long message (β); may be Infinity. */
  readonly bytesPerMs: number;
}

/** One stage's gradient all-reduce in a simulated data-parallel step. */
export interface AllReduceSpan {
  /** Global stage whose D replicas average their gradients. */
  readonly stage: number;
  /** Pipeline rank that holds the stage (in every replica). */
  readonly rank: number;
  /** Iteration (training step) index, 0-based. */
  readonly iteration: number;
  /** When it starts: the stage's last backward of the step has ended (and the rank's link is free). */
  readonly start: number;
  /** When it ends; the stage's optimizer step follows at once. */
  readonly end: number;
  /** The stage's gradient bytes (each replica's). */
  readonly bytes: number;
}

function checkLink(link: AllReduceLink): void {
  if (link === null || typeof link !== "object") {
    throw new TypeError(
      `link must be an object { latencyMs, bytesPerMs }, got ${describeValue(link)}`,
    );
  }
  const a = link.latencyMs, b = link.bytesPerMs;
  if (typeof a !== "number" || !Number.isFinite(a) || a < 0) {
    throw new RangeError(`link.latencyMs must be a finite number >= 0, got ${describeValue(a)}`);
  }
  if (typeof b !== "number" || !(b > 0)) {
    throw new RangeError(`link.bytesPerMs must be a positive number, got ${describeValue(b)}`);
  }
}

/**
 * Time of a ring all-reduce of `bytes` bytes over `replicas` ranks joined
 * by `link`, in units of `unitMs` ms (default 1: ms):
 * `(2(D − 1)/D · bytes / bytesPerMs + 2(D − 1) · latencyMs) / unitMs`.
 * The ring's reduce-scatter and all-gather each take D − 1 rounds, and in
 * each round every rank sends `bytes / D` to its neighbour. Zero when D = 1
 * or `bytes` = 0 (nothing to send).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ringAllReduceTime } from "@conveyor/core/analysis";
 * // 4 replicas, 1 MB over 0.01 ms latency and 1 GB/s (10⁶ bytes per ms):
 * // 2·3/4 · 1 ms + 6 · 0.01 ms = 1.56 ms.
 * const t = ringAllReduceTime({ latencyMs: 0.01, bytesPerMs: 1e6 }, 1e6, 4);
 * assert.ok(Math.abs(t - 1.56) < 1e-12);
 * assert.equal(ringAllReduceTime({ latencyMs: 0.01, bytesPerMs: 1e6 }, 1e6, 1), 0);
 * ```
 */
export function ringAllReduceTime(
  link: AllReduceLink,
  bytes: number,
  replicas: number,
  unitMs = 1,
): number {
  checkLink(link);
  if (typeof bytes !== "number" || !Number.isFinite(bytes) || bytes < 0) {
    throw new RangeError(`bytes must be a finite number >= 0, got ${describeValue(bytes)}`);
  }
  if (!Number.isInteger(replicas) || replicas < 1) {
    throw new RangeError(`replicas must be a positive integer, got ${describeValue(replicas)}`);
  }
  if (typeof unitMs !== "number" || !Number.isFinite(unitMs) || !(unitMs > 0)) {
    throw new RangeError(`unitMs must be a positive finite number, got ${describeValue(unitMs)}`);
  }
  if (replicas === 1 || bytes === 0) return 0;
  const rounds = 2 * (replicas - 1);
  return (rounds / replicas * bytes / link.bytesPerMs + rounds * link.latencyMs) / unitMs;
}

/**
 * The data-parallel options of `simulate`: D replicas of the pipeline, each
 * stage's gradients averaged over its D replicas by a ring all-reduce on
 * `link` once the stage's last backward of the step is done.
 */
export interface DataParallelOptions {
  /**
   * Data-parallel degree D: copies of the pipeline, each on its own shard
   * of the batch (default 1: no all-reduce). With D > 1, `link` and
   * `gradientBytes` are needed, and `iterations` must be 1.
   */
  readonly dataParallel?: number;
  /** The link between replicas (a `LinkModel`, say from `measureLink`). */
  readonly link?: AllReduceLink;
  /** Gradient bytes of each stage (one number for every stage, or one per stage). */
  readonly gradientBytes?: number | readonly number[];
  /** How many ms one unit of the costs stands for (default 1: costs in ms). */
  readonly unitMs?: number;
}
