/**
 * A point-to-point link as a latency and a bandwidth (the Hockney model:
 * one message of `n` bytes takes `α + n / β`), measured between two ranks of
 * any {@linkcode CommBackend}, and turned into the per-message
 * communication delay that `simulate` takes as its `comm` option, so that a
 * step time on other hardware (another host, another network) can be
 * predicted from a measurement there.
 *
 * @module
 */

import { checkOptionsObject } from "../../text/nearest.ts";
import type { CommBackend } from "./backend.ts";
import { checkPeer } from "./_checks.ts";
import { describeValue } from "../../text/describe.ts";

/**
 * A measured link: one message of `n` bytes takes `latencyMs + n / bytesPerMs`
 * ms (`bytesPerMs` may be Infinity for a hand-over that copies nothing).
 */
export interface LinkModel {
  /** One-way time of a minimal message, in ms (α). */
  readonly latencyMs: number;
  /** Bytes per ms of a long message (β; GB/s × 10⁶). */
  readonly bytesPerMs: number;
}

/** One timed size: the one-way time of a message of `bytes` bytes, in ms. */
export interface LinkSample {
  /** Message size in bytes. */
  readonly bytes: number;
  /** One-way time in ms. */
  readonly ms: number;
}

function checkNonNegative(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${what} must be a finite number >= 0, got ${describeValue(value)}`);
  }
  return value;
}

/**
 * Fits a {@linkcode LinkModel} to timed sizes: the latency is the time of the
 * smallest size (less its bytes at the fitted bandwidth), the bandwidth the
 * slope between the smallest and the largest size. Needs two distinct sizes;
 * when the largest is not slower (a zero-copy hand-over), the bandwidth is
 * Infinity.
 *
 * @example
 * ```ts
 * import { linkFromSamples } from "@conveyor/core/analysis";
 * const link = linkFromSamples([{ bytes: 4, ms: 0.5 }, { bytes: 4_000_004, ms: 1.5 }]);
 * console.log(link); // { latencyMs: 0.499999, bytesPerMs: 4000000 }
 * ```
 */
export function linkFromSamples(samples: readonly LinkSample[]): LinkModel {
  if (!Array.isArray(samples) || samples.length < 2) {
    throw new RangeError(`need at least 2 samples, got ${samples?.length}`);
  }
  for (const [i, s] of samples.entries()) {
    checkNonNegative(s?.bytes, `samples[${i}].bytes`);
    checkNonNegative(s?.ms, `samples[${i}].ms`);
  }
  const sorted = [...samples].sort((a, b) => a.bytes - b.bytes);
  const lo = sorted[0];
  const hi = sorted[sorted.length - 1];
  if (hi.bytes === lo.bytes) {
    throw new RangeError(`samples need two distinct sizes, got only ${lo.bytes} bytes`);
  }
  if (hi.ms <= lo.ms) return { latencyMs: lo.ms, bytesPerMs: Infinity };
  const bytesPerMs = (hi.bytes - lo.bytes) / (hi.ms - lo.ms);
  return { latencyMs: Math.max(0, lo.ms - lo.bytes / bytesPerMs), bytesPerMs };
}

/**
 * The simulator's communication delay for one message of `bytes` bytes:
 * `(latencyMs + bytes / bytesPerMs) / unitMs`, where `unitMs` is how many ms
 * one unit of the simulation's costs stands for (default 1: costs in ms).
 * Pass it as `simulate(schedule, { costs, comm })`; activations and input
 * gradients of a stage boundary have the same size, so one delay serves both.
 *
 * @example
 * ```ts
 * import { generateSchedule, simulate } from "@conveyor/core";
 * import { messageDelay } from "@conveyor/core/analysis";
 * // 0.05 ms latency, 5 GB/s; a 4 MiB activation; costs in ms.
 * const comm = messageDelay({ latencyMs: 0.05, bytesPerMs: 5e6 }, 4 << 20);
 * console.log(comm.toFixed(3)); // "0.889"
 * const s = generateSchedule("1f1b", { ranks: 4, microBatches: 8 });
 * const step = simulate(s, { costs: { F: 10, B: 20 }, comm }).makespan;
 * console.log(step.toFixed(1)); // "344.2" (330 with comm 0)
 * ```
 */
export function messageDelay(link: LinkModel, bytes: number, unitMs = 1): number {
  if (link === null || typeof link !== "object") {
    throw new TypeError(
      `link must be an object { latencyMs, bytesPerMs }, got ${describeValue(link)}`,
    );
  }
  const latency = checkNonNegative(link.latencyMs, "latencyMs");
  const bw = link.bytesPerMs;
  if (typeof bw !== "number" || !(bw > 0)) {
    throw new RangeError(`bytesPerMs must be a positive number, got ${describeValue(bw)}`);
  }
  checkNonNegative(bytes, "bytes");
  if (typeof unitMs !== "number" || !Number.isFinite(unitMs) || !(unitMs > 0)) {
    throw new RangeError(`unitMs must be a positive number, got ${describeValue(unitMs)}`);
  }
  return (latency + bytes / bw) / unitMs;
}

/** Options of {@linkcode measureLink}. */
export interface MeasureLinkOptions {
  /** Message sizes in bytes, multiples of 4 (default 4 B, 64 KiB, 1 MiB, 16 MiB). */
  readonly sizes?: readonly number[];
  /** Round trips timed per size, after one untimed (default 8). */
  readonly rounds?: number;
}

/**
 * Measures the link between this rank and `peer`: both call it (each naming
 * the other); the lower rank times round trips of each size (the median
 * round trip over 2 is one-way), fits {@linkcode linkFromSamples} and sends
 * the result to the other, so both resolve with the same model. Its messages
 * use tags starting with `link/`.
 *
 * @example
 * ```ts
 * import { InProcessBackend, measureLink } from "@conveyor/core/runtime";
 * const [a, b] = InProcessBackend.createGroup(2);
 * const sizes = [4, 1 << 20];
 * const [la, lb] = await Promise.all([measureLink(a, 1, { sizes }), measureLink(b, 0, { sizes })]);
 * console.log(la.latencyMs === lb.latencyMs && la.bytesPerMs > 0); // true
 * a.close();
 * b.close();
 * ```
 */
export async function measureLink(
  comm: CommBackend,
  peer: number,
  options: MeasureLinkOptions = {},
): Promise<LinkModel> {
  checkPeer(peer, comm.size);
  checkOptionsObject(options, ["sizes", "rounds"], "measureLink: ");
  if (peer === comm.rank) throw new RangeError(`peer must be another rank than ${peer}`);
  const sizes = options.sizes ?? [4, 64 << 10, 1 << 20, 16 << 20];
  if (!Array.isArray(sizes) || sizes.length < 2) {
    throw new RangeError(`sizes must hold at least 2 sizes, got ${describeValue(sizes)}`);
  }
  for (const s of sizes) {
    if (!Number.isInteger(s) || s < 4 || s % 4 !== 0) {
      throw new RangeError(
        `each size must be a positive multiple of 4 bytes, got ${describeValue(s)}`,
      );
    }
  }
  const rounds = options.rounds ?? 8;
  if (!Number.isInteger(rounds) || rounds < 1) {
    throw new RangeError(`rounds must be a positive integer, got ${describeValue(rounds)}`);
  }
  const lo = Math.min(comm.rank, peer);
  const tag = `link/${lo}-${Math.max(comm.rank, peer)}`;
  if (comm.rank !== lo) {
    for (const bytes of sizes) {
      for (let i = 0; i <= rounds; i++) {
        const got = await comm.recv(peer, `${tag}/${bytes}`);
        await comm.send(peer, `${tag}/${bytes}`, got, { transfer: true });
      }
    }
    const m = await comm.recv(peer, `${tag}/model`);
    return { latencyMs: m[0], bytesPerMs: m[1] };
  }
  const samples: LinkSample[] = [];
  for (const bytes of sizes) {
    let a: Float32Array = new Float32Array(bytes / 4);
    const times: number[] = [];
    for (let i = 0; i <= rounds; i++) {
      const t = performance.now();
      await comm.send(peer, `${tag}/${bytes}`, a, { transfer: true });
      a = await comm.recv(peer, `${tag}/${bytes}`);
      if (i > 0) times.push(performance.now() - t);
    }
    times.sort((x, y) => x - y);
    samples.push({ bytes, ms: times[times.length >> 1] / 2 });
  }
  const fit = linkFromSamples(samples);
  // Both ranks return the very same numbers: the f32 that travels.
  const model = new Float32Array([fit.latencyMs, fit.bytesPerMs]);
  await comm.send(peer, `${tag}/model`, model.slice(), { transfer: true });
  return { latencyMs: model[0], bytesPerMs: model[1] };
}
