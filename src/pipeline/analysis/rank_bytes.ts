/**
 * Bytes per rank from a schedule's peak in-flight activations and two sizes
 * of the model: the activations one micro-batch leaves on a full stage (a
 * rank's share of the model) and the whole model's optimizer state. A
 * stage of a schedule with V stages per rank is 1/V of a full stage, so a
 * stage-micro-batch holds 1/V of the full stage's bytes; with ZeRO-1 (the
 * optimizer state shared by D data-parallel replicas) a rank holds 1/D of
 * its stages' optimizer state. What `cli.ts simulate --activation-bytes
 * --optimizer-bytes --shard-optimizer` prints.
 *
 * @module
 */

import type { Schedule } from "../schedule/schedule.ts";
import { describeValue } from "../../text/describe.ts";

/** Options of {@linkcode rankBytes}. */
export interface RankBytesOptions {
  /** Activation bytes one micro-batch leaves on a full stage (default 0). */
  readonly activationBytes?: number;
  /** Optimizer state of the whole model, bytes, spread evenly over the stages (default 0). */
  readonly optimizerBytes?: number;
  /** ZeRO-1: the replicas D sharing each rank's optimizer state (default 1: whole). */
  readonly shardOptimizer?: number;
}

/** Bytes per rank, by what holds them. */
export interface RankBytes {
  /** Peak activation bytes per rank. */
  readonly activations: readonly number[];
  /** Optimizer-state bytes per rank. */
  readonly optimizer: readonly number[];
}

function bytes(v: unknown, what: string): number {
  if (v === undefined) return 0;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new RangeError(`${what} must be a finite number of bytes >= 0, got ${describeValue(v)}`);
  }
  return v;
}

/**
 * Peak activation and optimizer bytes per rank of `schedule`, from its
 * peak in-flight activations per rank (stage-micro-batches, as
 * `simulate` reports them).
 *
 * @example
 * ```ts
 * import { generateSchedule, simulate } from "@conveyor/core";
 * import { rankBytes } from "@conveyor/core/analysis";
 * const s = generateSchedule("v-min", { ranks: 8, microBatches: 32 });
 * const b = rankBytes(s, simulate(s).peakActivations, {
 *   activationBytes: 1000, optimizerBytes: 8000, shardOptimizer: 2,
 * });
 * console.log(Math.max(...b.activations), b.optimizer[0]); // 4000 500
 * ```
 */
export function rankBytes(
  schedule: Schedule,
  peakActivations: readonly number[],
  options: RankBytesOptions = {},
): RankBytes {
  const act = bytes(options.activationBytes, "activationBytes");
  const opt = bytes(options.optimizerBytes, "optimizerBytes");
  const d = options.shardOptimizer ?? 1;
  if (!Number.isInteger(d) || d < 1) {
    throw new RangeError(
      `shardOptimizer must be the replicas D sharing the optimizer (a positive integer), got ${
        describeValue(options.shardOptimizer)
      }`,
    );
  }
  if (!Array.isArray(peakActivations) || peakActivations.length !== schedule.ranks) {
    throw new RangeError(
      `peakActivations must hold one number per rank (${schedule.ranks}), got ${
        describeValue(peakActivations)
      }`,
    );
  }
  const V = schedule.stagesPerRank;
  const S = schedule.stageToRank.length;
  const held = new Array<number>(schedule.ranks).fill(0);
  for (const r of schedule.stageToRank) held[r]++;
  return {
    activations: peakActivations.map((p) => p * act / V),
    optimizer: held.map((n) => opt * n / S / d),
  };
}
