/**
 * The advisor's ranked table: one row per candidate (schedule, ranks,
 * micro-batches) with its predicted step time, bubble and bytes per rank,
 * ranked fitting-first, fastest-first; as Markdown or as JSON lines.
 *
 * @module
 */

import type { RankMemory } from "./rank_memory.ts";
import type { Schedule } from "../pipeline/schedule/schedule.ts";
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
  /**
   * How far a measurement of this step may lie from another on this machine,
   * ms (±): half the spread its calibration runs measured between their own
   * steps, times `predictedMs` (without a calibration, half the profile's
   * interquartile spread).
   */
  readonly spreadMs?: number;
  /**
   * True when its prediction and the first-ranked one's lie within their
   * spreads of each other: the advice cannot tell the two apart.
   */
  readonly tied?: boolean;
  /**
   * Schedules that make the same run (same configuration and actions; at one
   * rank, the same actions in any order): folded into this one.
   */
  readonly sameRunAs?: readonly string[];
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

// What makes two candidates the same run: configuration, cut and, per rank,
// the actions (in order; at one rank in any order, with nothing to wait for).
function runKey(c: AdviceCandidate): string | undefined {
  const s = c.generated;
  if (s === undefined) return undefined;
  const actions = s.actions.map((list) => {
    const names = list.map((a) => `${a.kind}${a.stage}.${a.microBatch}`);
    return (c.ranks === 1 ? names.sort() : names).join(" ");
  });
  return `${c.ranks}|${c.microBatches}|${c.boundaries.join(",")}|${actions.join("|")}`;
}

/**
 * Each distinct run once: candidates whose schedules make the same run (the
 * same ranks, micro-batches, cut and actions per rank; at one rank the same
 * actions in any order, as GPipe and 1F1B at P = 1) fold into the one
 * holding the fewest bytes (then the fastest predicted, then the first
 * given), which names the others in `sameRunAs`. Candidates without their
 * `generated` schedule are kept as they are. Order is kept.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import { type AdviceCandidate, distinctRuns } from "@conveyor/core/analysis";
 * const c = (schedule: "gpipe" | "1f1b", ranks: number, bytes: number): AdviceCandidate => ({
 *   schedule, ranks, microBatches: 4, stagesPerRank: 1,
 *   boundaries: ranks === 1 ? [0, 4] : [0, 2, 4], predictedMs: 5, bubble: 0,
 *   peakBytes: Array(ranks).fill(bytes), memory: [], fits: true,
 *   generated: generateSchedule(schedule, { ranks, microBatches: 4 }),
 * });
 * const runs = distinctRuns([c("gpipe", 1, 900), c("1f1b", 1, 300), c("gpipe", 2, 900), c("1f1b", 2, 600)]);
 * assert.deepEqual(runs.map((r) => `${r.schedule}/${r.ranks}`), ["1f1b/1", "gpipe/2", "1f1b/2"]);
 * assert.deepEqual(runs[0].sameRunAs, ["gpipe"]);
 * ```
 */
export function distinctRuns(candidates: readonly AdviceCandidate[]): AdviceCandidate[] {
  if (!Array.isArray(candidates)) {
    throw new TypeError(`candidates must be an array, got ${typeof candidates}`);
  }
  const groups = new Map<string, AdviceCandidate[]>();
  candidates.forEach((c, i) => {
    const k = runKey(c) ?? `#${i}`; // without its schedule: a run of its own
    groups.set(k, [...(groups.get(k) ?? []), c]);
  });
  const keep = new Map<AdviceCandidate, AdviceCandidate>();
  for (const group of groups.values()) {
    // Array.prototype.sort is stable: equals keep the given order.
    const best = [...group].sort((a, b) =>
      Math.max(...a.peakBytes) - Math.max(...b.peakBytes) || a.predictedMs - b.predictedMs
    )[0];
    const others = group.filter((c) =>
      c !== best
    ).map((c) => c.schedule);
    keep.set(best, others.length === 0 ? best : { ...best, sameRunAs: others });
  }
  return candidates.filter((c) => keep.has(c)).map((c) => keep.get(c)!);
}

/**
 * Marks `tied` the ranked candidates whose prediction lies within the
 * spreads (`spreadMs`, 0 where absent) of the first one's: the advice
 * cannot tell them apart from it. The first is marked when another is.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { type AdviceCandidate, markTies } from "@conveyor/core/analysis";
 * const c = (schedule: string, predictedMs: number): AdviceCandidate => ({
 *   schedule, ranks: 2, microBatches: 4, stagesPerRank: 1, boundaries: [0, 1, 2],
 *   predictedMs, spreadMs: 0.1 * predictedMs, bubble: 0, peakBytes: [1, 1], memory: [], fits: true,
 * });
 * const m = markTies([c("zb-h1", 10), c("1f1b", 11), c("gpipe", 14)]);
 * assert.deepEqual(m.map((x) => x.tied ?? false), [true, true, false]);
 * ```
 */
export function markTies(ranked: readonly AdviceCandidate[]): AdviceCandidate[] {
  if (ranked.length === 0) return [];
  const first = ranked[0];
  const near = (c: AdviceCandidate) =>
    c.fits === first.fits &&
    Math.abs(c.predictedMs - first.predictedMs) <= (c.spreadMs ?? 0) + (first.spreadMs ?? 0);
  const rest = ranked.slice(1).map((c) => (near(c) ? { ...c, tied: true } : c));
  const any = rest.some((c) => c.tied === true);
  return [any ? { ...first, tied: true } : first, ...rest];
}

/**
 * One line saying whether pipelining pays for this model, when the
 * candidates hold both one rank and more: "pipelining loses for this model:
 * one rank takes 4.6 ms per step (1f1b), the fastest pipeline 7.1 ms
 * (zb-h1 at P = 2)"; "pipelining wins …" with the speed-up; or that the two
 * cannot be told apart (within their spreads). Only candidates within the
 * memory limit count (all of them when none fits). Undefined otherwise.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { type AdviceCandidate, pipelineVerdict } from "@conveyor/core/analysis";
 * const c = (schedule: string, ranks: number, predictedMs: number): AdviceCandidate => ({
 *   schedule, ranks, microBatches: 8, stagesPerRank: 1, boundaries: [], predictedMs,
 *   spreadMs: 0.2, bubble: 0, peakBytes: [], memory: [], fits: true,
 * });
 * assert.equal(
 *   pipelineVerdict([c("1f1b", 1, 4.6), c("zb-h1", 2, 7.1)]),
 *   "pipelining loses for this model: one rank takes 4.6 ms per step (1f1b), " +
 *     "the fastest pipeline 7.1 ms (zb-h1 at P = 2)",
 * );
 * assert.equal(pipelineVerdict([c("zb-h1", 2, 7.1)]), undefined);
 * ```
 */
export function pipelineVerdict(candidates: readonly AdviceCandidate[]): string | undefined {
  const fitting = candidates.filter((c) => c.fits);
  const pool = fitting.length > 0 ? fitting : candidates;
  const fastest = (xs: AdviceCandidate[]) =>
    xs.reduce<AdviceCandidate | undefined>(
      (a, c) => (a === undefined || c.predictedMs < a.predictedMs ? c : a),
      undefined,
    );
  const one = fastest(pool.filter((c) => c.ranks === 1));
  const pipe = fastest(pool.filter((c) => c.ranks > 1));
  if (one === undefined || pipe === undefined) return undefined;
  const ms = (x: number) => x.toFixed(x < 1 ? 2 : 1);
  const both = `one rank takes ${ms(one.predictedMs)} ms per step (${one.schedule}), ` +
    `the fastest pipeline ${ms(pipe.predictedMs)} ms (${pipe.schedule} at P = ${pipe.ranks})`;
  const gap = Math.abs(one.predictedMs - pipe.predictedMs);
  if (gap <= (one.spreadMs ?? 0) + (pipe.spreadMs ?? 0)) {
    return `pipelining cannot be told from one rank for this model (within the measured ` +
      `spread): ${both}`;
  }
  if (one.predictedMs < pipe.predictedMs) return `pipelining loses for this model: ${both}`;
  return `pipelining wins for this model (${(one.predictedMs / pipe.predictedMs).toFixed(2)}× ` +
    `faster): ${both}`;
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
 * The ranked candidates as a Markdown table whose columns are padded to
 * line up on a terminal too: rank, schedule (with the schedules that make
 * the same run, `sameRunAs`), P, m, V, stages, predicted ms (± `spreadMs`
 * when known), a `≈` where the candidate cannot be told apart from the
 * first (`tied`), bubble, peak bytes per rank (activations + parameters,
 * gradients and optimizer state), fits, and with `verify` the measured ms
 * and its ratio to the prediction.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatAdviceTable } from "@conveyor/core/analysis";
 * const mem = { activations: 1024, parameters: 2048, gradients: 2048, optimizerState: 4096, stepCopies: 0, total: 9216 };
 * const t = formatAdviceTable([{
 *   schedule: "1f1b", ranks: 2, microBatches: 4, stagesPerRank: 1, boundaries: [0, 2, 3],
 *   predictedMs: 12.34, spreadMs: 1.5, bubble: 0.1, peakBytes: [9216, 9216], memory: [mem, mem],
 *   fits: true, sameRunAs: ["gpipe"],
 * }]).split("\n");
 * assert.equal(t[0].length, t[2].length); // columns line up
 * assert.match(t[2], /^\| +1 \| 1f1b \(= gpipe\) +\| +2 \| +4 \| +1 \| \[0, 2, 3\] +\| +12\.3 ± 1\.5 \|/);
 * ```
 */
export function formatAdviceTable(candidates: readonly AdviceCandidate[]): string {
  const verified = candidates.some((c) => c.measuredMs !== undefined);
  const ties = candidates.some((c) => c.tied === true);
  const head = [
    "#",
    "schedule",
    "P",
    "m",
    "V",
    "stages (layers)",
    "predicted ms",
    ...(ties ? ["≈ #1"] : []),
    "bubble",
    "peak bytes per rank",
    "fits",
    ...(verified ? ["measured ms", "measured / predicted"] : []),
  ];
  const left = new Set(["schedule", "stages (layers)", "peak bytes per rank", "≈ #1"]);
  const rows = candidates.map((c, i) => {
    const cells = [
      String(i + 1),
      c.sameRunAs === undefined || c.sameRunAs.length === 0
        ? c.schedule
        : `${c.schedule} (= ${c.sameRunAs.join(", ")})`,
      String(c.ranks),
      String(c.microBatches),
      String(c.stagesPerRank),
      `[${c.boundaries.join(", ")}]`,
      c.predictedMs.toFixed(1) + (c.spreadMs === undefined ? "" : ` ± ${c.spreadMs.toFixed(1)}`),
      ...(ties ? [c.tied === true ? "≈" : ""] : []),
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
    return cells;
  });
  const width = head.map((h, k) => Math.max(h.length, ...rows.map((r) => r[k].length), 3));
  const pad = (t: string, k: number) =>
    left.has(head[k]) ? t.padEnd(width[k]) : t.padStart(width[k]);
  const line = (cells: string[]) => `| ${cells.map(pad).join(" | ")} |`;
  const rule = `| ${
    head.map((
      h,
      k,
    ) => (left.has(h) ? ":" + "-".repeat(width[k] - 1) : "-".repeat(width[k] - 1) + ":"))
      .join(" | ")
  } |`;
  return [line(head), rule, ...rows.map(line)].join("\n");
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
    ...(c.spreadMs === undefined ? {} : { spreadMs: c.spreadMs }),
    ...(c.tied === undefined ? {} : { tied: c.tied }),
    ...(c.sameRunAs === undefined ? {} : { sameRunAs: [...c.sameRunAs] }),
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
