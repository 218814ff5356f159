/**
 * The advisor's ranked table: one row per candidate (schedule, ranks,
 * micro-batches) with its predicted step time, bubble and bytes per rank,
 * ranked fitting-first, fastest-first; as Markdown or as JSON lines.
 *
 * @module
 */

import type { RankMemory } from "./rank_memory.ts";
import type { Schedule } from "../schedule/schedule.ts";
import type { CostFactors } from "./step_prediction.ts";

/**
 * What a candidate and its `cli.ts advise --json` line both hold: the
 * configuration, the prediction, and what `verify` measured.
 */
export interface AdviceRow {
  /** Schedule name. */
  readonly schedule: string;
  /** Pipeline ranks p. */
  readonly ranks: number;
  /** Micro-batches per step m. */
  readonly microBatches: number;
  /** Stages per rank V. */
  readonly stagesPerRank: number;
  /** Stage s holds layers `[boundaries[s], boundaries[s + 1])`. */
  readonly boundaries: readonly number[];
  /** Predicted steady-state time per training step, ms. */
  readonly predictedMs: number;
  /** Predicted steady-state bubble. */
  readonly bubble: number;
  /** Predicted peak bytes per rank: the sum of that rank's `memory`. */
  readonly peakBytes: readonly number[];
  /** Whether every rank's `peakBytes` is within the memory limit (true without one). */
  readonly fits: boolean;
  /** With a calibration: the profile-only prediction (what `predictedMs` is without it), ms. */
  readonly uncalibratedMs?: number;
  /** With a calibration: the factors and runtime costs `predictedMs` was computed with. */
  readonly calibration?: {
    readonly factors: CostFactors;
    readonly actionMs: number;
    readonly handOverMs: number;
    readonly stepMs?: number;
  };
  /** Measured steady-state time per step (with `verify`, the first K), ms. */
  readonly measuredMs?: number;
  /** Measured steady-state bubble (with `verify`). */
  readonly measuredBubble?: number;
  /** Peak activation bytes per rank the ranks reported (with `verify`; the largest over the steps). */
  readonly measuredActivationBytes?: readonly number[];
}

/** One candidate configuration, predicted (and, when verified, measured). */
export interface AdviceCandidate extends AdviceRow {
  /** Predicted bytes per rank, by what holds them. */
  readonly memory: readonly RankMemory[];
  /**
   * The schedule predicted (for `zb-auto`, the one its search found with
   * the measured costs): pass it with `new FixedPartition(boundaries)` to
   * `PipelineParallelModel.create` to run what was predicted.
   */
  readonly generated?: Schedule;
}

/**
 * Candidates ranked: those that fit the memory limit first, each group by
 * predicted step time, then by the largest rank's bytes, then by name
 * (a stable, total order).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { type AdviceCandidate, rankCandidates } from "@conveyor/core/analysis";
 * const c = (schedule: string, predictedMs: number, fits: boolean): AdviceCandidate => ({
 *   schedule, ranks: 2, microBatches: 4, stagesPerRank: 1, boundaries: [0, 1, 2],
 *   predictedMs, bubble: 0, peakBytes: [1, 1], memory: [], fits,
 * });
 * const ranked = rankCandidates([c("gpipe", 10, false), c("1f1b", 12, true), c("zb-h1", 11, true)]);
 * assert.deepEqual(ranked.map((r) => r.schedule), ["zb-h1", "1f1b", "gpipe"]);
 * ```
 */
export function rankCandidates(candidates: readonly AdviceCandidate[]): AdviceCandidate[] {
  if (!Array.isArray(candidates)) {
    throw new TypeError(`candidates must be an array, got ${typeof candidates}`);
  }
  const key = (c: AdviceCandidate) => Math.max(...c.peakBytes);
  return [...candidates].sort((a, b) =>
    Number(b.fits) - Number(a.fits) || a.predictedMs - b.predictedMs || key(a) - key(b) ||
    (a.schedule < b.schedule ? -1 : a.schedule > b.schedule ? 1 : 0) || a.ranks - b.ranks ||
    a.microBatches - b.microBatches
  );
}

/** A byte count in binary units with three significant digits: `"1.50 MiB"`. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = bytes;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toPrecision(3)} ${units[u]}`;
}

/**
 * The ranked candidates as a Markdown table: rank, schedule, P, m, V,
 * stages, predicted ms, bubble, peak bytes per rank (activations +
 * parameters, gradients and optimizer state), fits, and with `verify` the
 * measured ms and its ratio to the prediction.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatAdviceTable } from "@conveyor/core/analysis";
 * const mem = { activations: 1024, parameters: 2048, gradients: 2048, optimizerState: 4096, stepCopies: 0, total: 9216 };
 * const t = formatAdviceTable([{
 *   schedule: "1f1b", ranks: 2, microBatches: 4, stagesPerRank: 1, boundaries: [0, 2, 3],
 *   predictedMs: 12.34, bubble: 0.1, peakBytes: [9216, 9216], memory: [mem, mem], fits: true,
 * }]);
 * assert.equal(
 *   t.split("\n")[2],
 *   "| 1 | 1f1b | 2 | 4 | 1 | [0, 2, 3] | 12.3 | 10.0% | 9.00 KiB (1.00 KiB act), 9.00 KiB (1.00 KiB act) | yes |",
 * );
 * ```
 */
export function formatAdviceTable(candidates: readonly AdviceCandidate[]): string {
  const verified = candidates.some((c) => c.measuredMs !== undefined);
  const head = [
    "#",
    "schedule",
    "P",
    "m",
    "V",
    "stages (layers)",
    "predicted ms",
    "bubble",
    "peak bytes per rank",
    "fits",
    ...(verified ? ["measured ms", "measured / predicted"] : []),
  ];
  const lines = [
    `| ${head.join(" | ")} |`,
    `| ${head.map((_, i) => ([1, 5, 8].includes(i) ? ":---" : "---:")).join(" | ")} |`,
  ];
  candidates.forEach((c, i) => {
    const cells = [
      String(i + 1),
      c.schedule,
      String(c.ranks),
      String(c.microBatches),
      String(c.stagesPerRank),
      `[${c.boundaries.join(", ")}]`,
      c.predictedMs.toFixed(1),
      `${(100 * c.bubble).toFixed(1)}%`,
      c.memory.map((m) => `${formatBytes(m.total)} (${formatBytes(m.activations)} act)`).join(
        ", ",
      ),
      c.fits ? "yes" : "no",
    ];
    if (verified) {
      cells.push(
        c.measuredMs === undefined ? "—" : c.measuredMs.toFixed(1),
        c.measuredMs === undefined ? "—" : (c.measuredMs / c.predictedMs).toFixed(3),
      );
    }
    lines.push(`| ${cells.join(" | ")} |`);
  });
  return lines.join("\n");
}

/**
 * One line of `cli.ts advise --json`: a candidate, best first (at least
 * `schedule`, `ranks`, `microBatches`, `predictedMs`, `peakBytes`, and
 * `measuredMs` on the first K with `--verify K`).
 */
export interface AdviceJson extends AdviceRow {
  /** Per rank: activations, parameters, gradients, optimizerState, stepCopies (bytes). */
  readonly memory: readonly Omit<RankMemory, "total">[];
}

const pick = (c: { actionMs: number; handOverMs: number; stepMs?: number }) => ({
  actionMs: c.actionMs,
  handOverMs: c.handOverMs,
  ...(c.stepMs === undefined ? {} : { stepMs: c.stepMs }),
});

/**
 * A candidate as its `--json` line's object (see {@linkcode AdviceJson}).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { adviceJson } from "@conveyor/core/analysis";
 * const mem = { activations: 1, parameters: 2, gradients: 2, optimizerState: 4, stepCopies: 0, total: 9 };
 * const j = adviceJson({
 *   schedule: "zb-h1", ranks: 2, microBatches: 8, stagesPerRank: 1, boundaries: [0, 3, 6],
 *   predictedMs: 100, bubble: 0.05, peakBytes: [9, 9], memory: [mem, mem], fits: true,
 * });
 * assert.ok(JSON.stringify(j).startsWith('{"schedule":"zb-h1","ranks":2,"microBatches":8'));
 * assert.deepEqual(j.memory[0], { activations: 1, parameters: 2, gradients: 2, optimizerState: 4, stepCopies: 0 });
 * ```
 */
export function adviceJson(c: AdviceCandidate): AdviceJson {
  return {
    schedule: c.schedule,
    ranks: c.ranks,
    microBatches: c.microBatches,
    stagesPerRank: c.stagesPerRank,
    boundaries: [...c.boundaries],
    predictedMs: c.predictedMs,
    bubble: c.bubble,
    peakBytes: [...c.peakBytes],
    memory: c.memory.map(({ total: _, ...rest }) => rest),
    fits: c.fits,
    ...(c.measuredMs === undefined ? {} : { measuredMs: c.measuredMs }),
    ...(c.measuredBubble === undefined ? {} : { measuredBubble: c.measuredBubble }),
    ...(c.measuredActivationBytes === undefined
      ? {}
      : { measuredActivationBytes: [...c.measuredActivationBytes] }),
    ...(c.uncalibratedMs === undefined ? {} : { uncalibratedMs: c.uncalibratedMs }),
    ...(c.calibration === undefined ? {} : {
      calibration: { factors: { ...c.calibration.factors }, ...pick(c.calibration) },
    }),
  };
}
