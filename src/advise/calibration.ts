/**
 * Calibration of profiled costs against a short real pipeline run: each
 * action kind's ratio of the measured span (the runtime's event for the
 * action) to the profiled cost of its stage, the runtime's cost between
 * actions and the hand-over delay, read off the run's events. Layers
 * profiled on their own miss what a real pipeline adds (ranks sharing the
 * cores' memory bandwidth and caches while they compute at once, the
 * executor's own work per action); the ratios carry it over to every
 * candidate.
 *
 * @module
 */

import type { Schedule, TimedEvent } from "../pipeline/schedule/schedule.ts";
import {
  type CostFactors,
  predictStep,
  type RuntimeOverheads,
  type StageCostTable,
} from "./step_prediction.ts";
import { describeValue } from "../text/describe.ts";

/** The action kinds calibrated. */
export type CalibratedKind = "F" | "I" | "W" | "B";

/** One kind's ratios of measured to profiled time. */
export interface KindFactor {
  /** Median ratio over every action of the kind (all stages and micro-batches). */
  readonly factor: number;
  /** Interquartile range of the ratios over their median. */
  readonly spread: number;
  /** Actions measured. */
  readonly samples: number;
  /** Median ratio per stage index (null where the kind ran on no such stage). */
  readonly byStage: readonly (number | null)[];
}

/** One real run to calibrate from. */
export interface CalibrationRun {
  /** The schedule that ran. */
  readonly schedule: Schedule;
  /** Each stage's profiled compute per action kind, ms, without any runtime cost. */
  readonly profiled: StageCostTable;
  /** The run's events (one per action: rank, action, iteration, start and end in ms). */
  readonly events: readonly TimedEvent[];
}

/** What {@linkcode fitCalibration} finds. */
export interface CalibrationFit {
  /** Per kind measured: its ratios. */
  readonly kinds: Readonly<Partial<Record<CalibratedKind, KindFactor>>>;
  /** The factors to predict with (a kind not measured takes a related kind's, else 1). */
  readonly factors: CostFactors;
  /**
   * The runtime's costs: `actionMs` the median gap between a rank's
   * consecutive actions when the second's inputs were already there,
   * `handOverMs` the median delay from a producer's end to its waiting
   * consumer's start less `actionMs` (at least 0).
   */
  readonly overheads: RuntimeOverheads;
  /** Gaps between a rank's actions that measured `actionMs`. */
  readonly actionSamples: number;
  /** Waits on another rank that measured `handOverMs`. */
  readonly handOverSamples: number;
}

/** The q-quantile of sorted values, linearly interpolated. */
function quantile(sorted: readonly number[], q: number): number {
  const x = (sorted.length - 1) * q;
  const lo = Math.floor(x);
  const hi = Math.ceil(x);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo);
}

const sortedOf = (xs: readonly number[]) => [...xs].sort((a, b) => a - b);
const medianOf = (xs: readonly number[]) => quantile(sortedOf(xs), 0.5);

function kindFactor(ratios: readonly number[], byStage: readonly number[][]): KindFactor {
  const s = sortedOf(ratios);
  const factor = quantile(s, 0.5);
  return {
    factor,
    spread: factor > 0 ? (quantile(s, 0.75) - quantile(s, 0.25)) / factor : 0,
    samples: s.length,
    byStage: byStage.map((xs) => (xs.length === 0 ? null : medianOf(xs))),
  };
}

function checkRun(run: CalibrationRun, i: number): void {
  const S = run?.schedule?.stageToRank?.length;
  if (typeof S !== "number" || !Array.isArray(run.events)) {
    throw new TypeError(`runs[${i}] must be { schedule, profiled, events }`);
  }
  for (const k of ["F", "I", "W", "B"] as const) {
    const t = run.profiled?.[k];
    if (!Array.isArray(t) || t.length !== S || t.some((v) => !(v >= 0) || !Number.isFinite(v))) {
      throw new RangeError(
        `runs[${i}].profiled.${k} must hold one finite cost >= 0 per stage (${S}), got ${
          JSON.stringify(t)
        }`,
      );
    }
  }
  run.events.forEach((e, j) => {
    const s = e?.action?.stage;
    if (
      !(Number.isInteger(s) && s >= 0 && s < S) || !Number.isFinite(e.start) ||
      !Number.isFinite(e.end) || e.end < e.start
    ) {
      throw new RangeError(
        `runs[${i}].events[${j}] must name a stage in [0, ${S}) and end at or after its start, got ${
          JSON.stringify(e)
        }`,
      );
    }
  });
}

/**
 * Fits the calibration from real runs (see the module doc). Per kind, each
 * action's ratio is its span over its stage's profiled cost (skipped where
 * that is 0); the factor is their median, pooled over the runs. A kind not
 * measured takes: I or W the other backward kinds' factor (B, else W or I),
 * F 1; B stays absent (its parts scaled by I and W). Between two
 * consecutive actions of a rank in one iteration (not after a stage's last
 * backward, where its optimizer step runs): when the second needs nothing
 * from another rank, or what it needs ended before the first started, the
 * gap is the runtime's cost per action; when what it needs ended after
 * the first did (the rank waited), the delay from that end to its start,
 * less the cost per action, is the hand-over. `fallback` gives either
 * where the runs have no such pair.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import { fitCalibration } from "@conveyor/core/analysis";
 * const schedule = generateSchedule("gpipe", { ranks: 1, microBatches: 2 }); // F0 F1 B0 B1
 * const ev = (i: number, start: number, end: number) =>
 *   ({ rank: 0, action: schedule.actions[0][i], iteration: 0, start, end });
 * // F profiled 10 ms runs 12 and 12; B profiled 20 ms runs 30 and 30; 1 ms between actions.
 * const events = [ev(0, 0, 12), ev(1, 13, 25), ev(2, 26, 56), ev(3, 57, 87)];
 * const profiled = { F: [10], I: [12], W: [8], B: [20], step: [0] };
 * const fit = fitCalibration([{ schedule, profiled, events }], { actionMs: 0, handOverMs: 0 });
 * assert.equal(fit.kinds.F?.factor, 1.2);
 * assert.equal(fit.factors.B, 1.5);
 * assert.equal(fit.factors.I, 1.5); // not measured: the B factor
 * assert.equal(fit.overheads.actionMs, 1);
 * ```
 */
export function fitCalibration(
  runs: readonly CalibrationRun[],
  fallback: RuntimeOverheads,
): CalibrationFit {
  if (!Array.isArray(runs) || runs.length === 0) {
    throw new RangeError(
      `runs must be a non-empty array of calibration runs, got ${describeValue(runs)}`,
    );
  }
  runs.forEach(checkRun);
  for (const k of ["actionMs", "handOverMs"] as const) {
    const v = fallback?.[k];
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new RangeError(
        `fallback.${k} must be a finite number of ms >= 0, got ${describeValue(v)}`,
      );
    }
  }
  const S = Math.max(
    ...(runs as readonly CalibrationRun[]).map((r) => r.schedule.stageToRank.length),
  );
  const ratios = new Map<CalibratedKind, number[]>();
  const byStage = new Map<CalibratedKind, number[][]>();
  const gaps: number[] = [];
  const waits: number[] = [];
  for (const run of runs as readonly CalibrationRun[]) {
    const { schedule, profiled, events } = run;
    const where = schedule.stageToRank;
    const last = where.length - 1;
    for (const e of events) {
      const k = e.action.kind as CalibratedKind;
      const p = profiled[k][e.action.stage];
      if (!(p > 0)) continue;
      if (!ratios.has(k)) {
        ratios.set(k, []);
        byStage.set(k, Array.from({ length: S }, () => []));
      }
      const r = (e.end - e.start) / p;
      ratios.get(k)!.push(r);
      byStage.get(k)![e.action.stage].push(r);
    }
    // Producers by iteration, stage and micro-batch: forwards and gradients.
    const key = (it: number, s: number, mb: number) => `${it}:${s}:${mb}`;
    const fwd = new Map<string, TimedEvent>();
    const grad = new Map<string, TimedEvent>();
    for (const e of events) {
      const at = key(e.iteration, e.action.stage, e.action.microBatch);
      if (e.action.kind === "F") fwd.set(at, e);
      else if (e.action.kind !== "W") grad.set(at, e);
    }
    // Each rank's last backward per stage: its optimizer step follows.
    const lastBackward = new Set<string>();
    schedule.actions.forEach((list) => {
      const seen = new Map<number, string>();
      for (const a of list) if (a.kind !== "F") seen.set(a.stage, `${a.kind}${a.microBatch}`);
      for (const [s, id] of seen) lastBackward.add(`${s}:${id}`);
    });
    for (let rank = 0; rank < schedule.ranks; rank++) {
      const own = events.filter((e) => e.rank === rank).sort((a, b) =>
        a.iteration - b.iteration || a.start - b.start
      );
      for (let j = 1; j < own.length; j++) {
        const prev = own[j - 1];
        const next = own[j];
        if (prev.iteration !== next.iteration) continue;
        const pa = prev.action;
        if (lastBackward.has(`${pa.stage}:${pa.kind}${pa.microBatch}`)) continue;
        const { kind, stage: s, microBatch: mb } = next.action;
        const dep = kind === "F"
          ? (s > 0 ? fwd.get(key(next.iteration, s - 1, mb)) : undefined)
          : kind === "W"
          ? undefined
          : (s < last ? grad.get(key(next.iteration, s + 1, mb)) : undefined);
        const remote = dep !== undefined && dep.rank !== rank;
        if (!remote || dep.end <= prev.start) gaps.push(next.start - prev.end);
        else if (dep.end >= prev.end) waits.push(next.start - dep.end);
      }
    }
  }
  const kinds: Partial<Record<CalibratedKind, KindFactor>> = {};
  for (const [k, rs] of ratios) kinds[k] = kindFactor(rs, byStage.get(k)!);
  const f = (k: CalibratedKind) => kinds[k]?.factor;
  const I = f("I") ?? f("B") ?? f("W") ?? 1;
  const W = f("W") ?? f("B") ?? f("I") ?? 1;
  const B = f("B");
  const actionMs = gaps.length === 0 ? fallback.actionMs : Math.max(0, medianOf(gaps));
  const handOverMs = waits.length === 0
    ? fallback.handOverMs
    : Math.max(0, medianOf(waits) - actionMs);
  return {
    kinds,
    factors: { F: f("F") ?? 1, I, W, ...(B === undefined ? {} : { B }) },
    overheads: { actionMs, handOverMs },
    actionSamples: gaps.length,
    handOverSamples: waits.length,
  };
}

/** One calibration run's step time, measured and predicted with the fit. */
export interface CalibrationCheck {
  /** Schedule that ran. */
  readonly schedule: string;
  /** Stage s held layers `[boundaries[s], boundaries[s + 1])`. */
  readonly boundaries: readonly number[];
  /** Measured steady-state ms per step. */
  readonly measuredMs: number;
  /** Predicted ms per step with the calibrated costs. */
  readonly predictedMs: number;
  /** Predicted ms per step from the profile alone. */
  readonly uncalibratedMs: number;
  /**
   * How much the run's own steps varied: (longest − shortest) / median of
   * the periods between its measured steps (0 with one period).
   */
  readonly spread: number;
}

/**
 * A calibration as the advice reports it: the fit (its `overheads` with
 * the `stepMs` of `fitStepOverhead`), where it was made, and its check.
 */
export interface AdviceCalibration extends CalibrationFit {
  /** Ranks of the candidates it serves. */
  readonly ranks: number;
  /** Micro-batches of its runs. */
  readonly microBatches: number;
  /** Each run: measured beside predicted. */
  readonly runs: readonly CalibrationCheck[];
  /**
   * The largest `spread` of the runs: how far apart two measurements of the
   * same step on this machine may lie, relative to the step. Predictions
   * closer than this cannot be told apart.
   */
  readonly spread: number;
  /** Wall time of the runs, ms. */
  readonly elapsedMs: number;
}

/** A real run's schedule, its costs as predicted (calibrated) and its measured period. */
export interface StepCheckRun {
  /** The schedule that ran. */
  readonly schedule: Schedule;
  /** Its stages' costs as the prediction takes them. */
  readonly costs: StageCostTable;
  /** Measured steady-state ms per step. */
  readonly measuredMs: number;
}

/**
 * The runtime's cost per training step and rank (`RuntimeOverheads.stepMs`)
 * that makes the predictions of `runs` (with `overheads`) match their
 * measured periods on average: what the actions' spans and the gaps between
 * them leave out (the optimizer step's own turn, the step's bookkeeping
 * between iterations). 0 where the predictions are already as long or
 * longer. Found by bisection (the period grows with it).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import { fitStepOverhead, predictStep } from "@conveyor/core/analysis";
 * const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
 * const costs = { F: [1, 1], I: [1, 1], W: [1, 1], B: [2, 2], step: [0, 0] };
 * const none = { actionMs: 0, handOverMs: 0 };
 * assert.equal(predictStep(schedule, costs, none).stepMs, 15); // 3 ms short of 18 measured
 * const x = fitStepOverhead([{ schedule, costs, measuredMs: 18 }], none);
 * // With x ms per step and rank, the prediction meets the measurement.
 * assert.ok(Math.abs(predictStep(schedule, costs, { ...none, stepMs: x }).stepMs - 18) < 1e-6);
 * assert.equal(fitStepOverhead([{ schedule, costs, measuredMs: 12 }], none), 0);
 * ```
 */
export function fitStepOverhead(
  runs: readonly StepCheckRun[],
  overheads: RuntimeOverheads,
): number {
  if (!Array.isArray(runs) || runs.length === 0) {
    throw new RangeError(`runs must be a non-empty array, got ${describeValue(runs)}`);
  }
  (runs as readonly StepCheckRun[]).forEach((r, i) => {
    if (!(r?.measuredMs >= 0) || !Number.isFinite(r.measuredMs)) {
      throw new RangeError(
        `runs[${i}].measuredMs must be a finite number >= 0, got ${r?.measuredMs}`,
      );
    }
  });
  const gap = (x: number) => {
    let d = 0;
    for (const r of runs as readonly StepCheckRun[]) {
      d += predictStep(r.schedule, r.costs, { ...overheads, stepMs: x }).stepMs - r.measuredMs;
    }
    return d;
  };
  if (gap(0) >= 0) return 0;
  let lo = 0;
  let hi = Math.max(...(runs as readonly StepCheckRun[]).map((r) => r.measuredMs), 1e-6);
  while (gap(hi) < 0) hi *= 2;
  for (let k = 0; k < 50; k++) {
    const mid = (lo + hi) / 2;
    if (gap(mid) < 0) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}
