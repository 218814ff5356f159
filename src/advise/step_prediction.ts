/**
 * A training step's time, predicted from measured per-layer costs: the
 * partition into stages (the exact min-max partitioner on each layer's
 * F + I + W + optimizer step), each stage's cost per action kind plus the
 * runtime's cost per action, and the simulator's steady-state period with
 * the measured hand-over delay.
 *
 * @module
 */

import type { Schedule } from "../pipeline/schedule/schedule.ts";
import type { ActionCosts } from "../pipeline/schedule/costs.ts";
import {
  generateSchedule,
  SCHEDULE_REGISTRY,
  type ScheduleName,
} from "../pipeline/schedule/generate.ts";
import { simulate } from "../pipeline/analysis/simulate.ts";
import { summarizeTimeline } from "../pipeline/analysis/timeline_summary.ts";
import { simulateContention } from "./_contention.ts";
import {
  FixedPartition,
  LoadBalancedPartition,
  type PartitionResult,
} from "../pipeline/partition/partition.ts";
import { describeValue } from "../text/describe.ts";

/** One layer's measured times for one micro-batch, ms (medians). */
export interface LayerTimes {
  /** Forward. */
  readonly F: { readonly median: number };
  /** Input gradient. */
  readonly I: { readonly median: number };
  /** Weight gradient. */
  readonly W: { readonly median: number };
  /** Optimizer step of its parameters, once per training step (absent: none). */
  readonly step?: { readonly median: number };
}

/** What the runtime adds to the compute, ms. */
export interface RuntimeOverheads {
  /** Added to every action (the rank's loop, its event-loop turn, posting the output). */
  readonly actionMs: number;
  /** Delay of a result crossing to another rank. */
  readonly handOverMs: number;
  /**
   * Added once per training step on every rank, spread like the optimizer
   * step over its stages' backward actions (default 0; a calibration's
   * `fitStepOverhead`).
   */
  readonly stepMs?: number;
}

/** Factors on the profiled costs per kind: `B` absent scales a B's I and W parts by `I` and `W`. */
export interface CostFactors {
  /** Forward (and the loss). */
  readonly F: number;
  /** Input gradient. */
  readonly I: number;
  /** Weight gradient. */
  readonly W: number;
  /** Full backward; absent: `I` on its I part and `W` on its W part. */
  readonly B?: number;
}

/** Each stage's cost per action kind for one micro-batch, ms, and its optimizer step. */
export interface StageCostTable {
  /** Forward (the last stage's includes the loss). */
  readonly F: readonly number[];
  /** Input gradient. */
  readonly I: readonly number[];
  /** Weight gradient. */
  readonly W: readonly number[];
  /** Full backward: I and W in one action. */
  readonly B: readonly number[];
  /** The stage's optimizer step, once per training step. */
  readonly step: readonly number[];
}

function checkLayers(layers: readonly LayerTimes[]): void {
  if (!Array.isArray(layers) || layers.length === 0) {
    throw new RangeError(
      `layers must be a non-empty array of layer times, got ${describeValue(layers)}`,
    );
  }
  layers.forEach((l, i) => {
    for (const k of ["F", "I", "W", "step"] as const) {
      const t = l?.[k];
      if (t === undefined && k === "step") continue;
      const v = t?.median;
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
        throw new RangeError(
          `layers[${i}].${k}.median must be a finite number >= 0, got ${describeValue(v)}`,
        );
      }
    }
  });
}

function checkMs(name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new RangeError(`${name} must be a finite number of ms >= 0, got ${describeValue(v)}`);
  }
  return v;
}

/**
 * Each layer's load per micro-batch for balancing: F + I + W, plus its
 * optimizer step spread over the `microBatches`, plus `lossMs` on the last
 * layer.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { layerLoads } from "@conveyor/core/analysis";
 * const t = (ms: number) => ({ median: ms });
 * const layers = [{ F: t(1), I: t(2), W: t(1), step: t(4) }, { F: t(2), I: t(2), W: t(2) }];
 * assert.deepEqual(layerLoads(layers, 2, 0.5), [1 + 2 + 1 + 4 / 2, 2 + 2 + 2 + 0.5]);
 * ```
 */
export function layerLoads(
  layers: readonly LayerTimes[],
  microBatches: number,
  lossMs = 0,
): number[] {
  checkLayers(layers);
  if (!Number.isInteger(microBatches) || microBatches < 1) {
    throw new RangeError(
      `microBatches must be a positive integer, got ${describeValue(microBatches)}`,
    );
  }
  checkMs("lossMs", lossMs);
  return layers.map((l, i) =>
    l.F.median + l.I.median + l.W.median + (l.step?.median ?? 0) / microBatches +
    (i === layers.length - 1 ? lossMs : 0)
  );
}

/**
 * Sums each stage's layers (stage s: layers `[boundaries[s],
 * boundaries[s + 1])`) per kind and adds `actionMs` to each action: F
 * (with `lossMs` on the last stage), I, W, B = I + W as one action, and
 * the step. With `factors` (see `fitCalibration`) each kind's sum is
 * scaled by its factor first (B by `factors.B`, or its I and W parts by
 * theirs); the step is not.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { stageCosts } from "@conveyor/core/analysis";
 * const t = (ms: number) => ({ median: ms });
 * const layers = [{ F: t(1), I: t(2), W: t(1), step: t(4) }, { F: t(2), I: t(2), W: t(2) }];
 * const c = stageCosts(layers, [0, 1, 2], { lossMs: 0.5, actionMs: 0.1 });
 * assert.deepEqual(c.F, [1 + 0.1, 2 + 0.5 + 0.1]);
 * assert.deepEqual(c.B, [2 + 1 + 0.1, 2 + 2 + 0.1]);
 * assert.deepEqual(c.step, [4, 0]);
 * ```
 */
export function stageCosts(
  layers: readonly LayerTimes[],
  boundaries: readonly number[],
  options: {
    readonly lossMs?: number;
    readonly actionMs?: number;
    readonly factors?: CostFactors;
  } = {},
): StageCostTable {
  checkLayers(layers);
  const lossMs = checkMs("lossMs", options.lossMs ?? 0);
  const actionMs = checkMs("actionMs", options.actionMs ?? 0);
  const f = options.factors;
  if (f !== undefined) checkFactors(f);
  if (
    !Array.isArray(boundaries) || boundaries.length < 2 || boundaries[0] !== 0 ||
    boundaries[boundaries.length - 1] !== layers.length ||
    boundaries.some((b, i) => i > 0 && !(Number.isInteger(b) && b > boundaries[i - 1]))
  ) {
    throw new RangeError(
      `boundaries must rise strictly from 0 to the layer count ${layers.length}, got ${
        JSON.stringify(boundaries)
      }`,
    );
  }
  const S = boundaries.length - 1;
  const sum = (s: number, k: "F" | "I" | "W" | "step") => {
    let t = 0;
    for (let i = boundaries[s]; i < boundaries[s + 1]; i++) t += layers[i][k]?.median ?? 0;
    return t;
  };
  const F: number[] = [], I: number[] = [], W: number[] = [], B: number[] = [];
  const step: number[] = [];
  for (let s = 0; s < S; s++) {
    if (f === undefined) {
      F.push(sum(s, "F") + (s === S - 1 ? lossMs : 0) + actionMs);
      I.push(sum(s, "I") + actionMs);
      W.push(sum(s, "W") + actionMs);
      B.push(sum(s, "I") + sum(s, "W") + actionMs);
    } else {
      F.push((sum(s, "F") + (s === S - 1 ? lossMs : 0)) * f.F + actionMs);
      I.push(sum(s, "I") * f.I + actionMs);
      W.push(sum(s, "W") * f.W + actionMs);
      B.push(
        (f.B === undefined
          ? sum(s, "I") * f.I + sum(s, "W") * f.W
          : (sum(s, "I") + sum(s, "W")) * f.B) +
          actionMs,
      );
    }
    step.push(sum(s, "step"));
  }
  return { F, I, W, B, step };
}

/** A schedule with the partition and stage costs it is predicted with. */
export interface PlannedCandidate {
  /** The schedule (for `zb-auto`, the one its search found with these costs). */
  readonly schedule: Schedule;
  /** The min-max partition of the layers' loads into the schedule's stages. */
  readonly partition: PartitionResult;
  /** Each stage's costs. */
  readonly costs: StageCostTable;
  /** Each stage's costs while every rank computes (with `together` layers given). */
  readonly together?: StageCostTable;
}

/** Layer times measured while every rank computed at once, and the loss's, for {@linkcode planCandidate}. */
export interface TogetherTimes {
  /** Per layer, as `layers`. */
  readonly layers: readonly LayerTimes[];
  /** The loss, ms (default 0). */
  readonly lossMs?: number;
}

/**
 * Builds schedule `name` for `ranks` and `microBatches`, cuts the layers
 * into its stages by the exact min-max partition of {@linkcode layerLoads}
 * (with several stages per rank, or by {@linkcode rankBalancedBoundaries}
 * when that predicts a shorter step) and costs each stage
 * ({@linkcode stageCosts}). The cost-aware schedules (`zb-auto`, `v-half`,
 * `v-min`) build their orders with the model's costs per full stage (a
 * rank's share) and the hand-over delay. With `together` (the layers
 * timed while every rank computed at once) the loads and zb-auto's search take those times, the candidate
 * carries their stage costs too, and the step is predicted with contention
 * ({@linkcode PredictOptions}). With `factors` (a calibration against a
 * real run, `fitCalibration`) every layer's F (and the loss), I and W are
 * scaled by their kind's factor before the cut and the costs, and a stage's
 * B is `factors.B` times its profiled I + W where given (the optimizer
 * step stays as profiled); `together` must then be absent. Throws the
 * generator's RangeError for a combination the schedule does not support,
 * and a RangeError when there are fewer layers than stages.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { planCandidate } from "@conveyor/core/analysis";
 * const t = (ms: number) => ({ median: ms });
 * const layers = [1, 1, 2, 4].map((ms) => ({ F: t(ms), I: t(ms), W: t(ms) }));
 * const c = planCandidate("1f1b", 2, 4, layers, { actionMs: 0, handOverMs: 0 });
 * assert.deepEqual(c.partition.boundaries, [0, 3, 4]); // loads 3 + 3 + 6 against 12
 * assert.deepEqual(c.costs.F, [4, 4]);
 * ```
 */
export function planCandidate(
  name: ScheduleName,
  ranks: number,
  microBatches: number,
  layers: readonly LayerTimes[],
  overheads: RuntimeOverheads,
  lossMs = 0,
  together?: TogetherTimes,
  factors?: CostFactors,
): PlannedCandidate {
  layerLoads(layers, microBatches, lossMs); // checks the alone times
  if (together !== undefined && together?.layers?.length !== layers.length) {
    throw new RangeError(
      `together.layers must hold one time per layer (${layers.length}), got ${together?.layers?.length}`,
    );
  }
  if (factors !== undefined) {
    if (together !== undefined) {
      throw new RangeError(
        "factors and together exclude each other: calibrated costs are one table",
      );
    }
    checkFactors(factors);
  }
  const calibrated = factors === undefined ? layers : scaleLayers(layers, factors);
  const busyLayers = together?.layers ?? calibrated;
  const busyLossMs = together === undefined ? lossMs * (factors?.F ?? 1) : (together.lossMs ?? 0);
  const loads = layerLoads(busyLayers, microBatches, busyLossMs);
  checkMs("overheads.actionMs", overheads?.actionMs);
  checkMs("overheads.handOverMs", overheads?.handOverMs);
  let schedule: Schedule;
  if (SCHEDULE_REGISTRY.definition(name).costAware) {
    // zb-auto, v-half, v-min build their orders from the costs, per full
    // stage: the model's total per kind over the ranks.
    const total = (k: "F" | "I" | "W") =>
      busyLayers.reduce((a, l) => a + l[k].median, 0) / ranks + overheads.actionMs;
    schedule = generateSchedule(name, {
      ranks,
      microBatches,
      costs: { F: total("F") + busyLossMs / ranks, I: total("I"), W: total("W") },
      comm: overheads.handOverMs,
    });
  } else {
    schedule = generateSchedule(name, { ranks, microBatches });
  }
  const stages = schedule.stageToRank.length;
  if (layers.length < stages) {
    throw new RangeError(
      `${name} at ${ranks} ranks has ${stages} stages, more than the model's ${layers.length} layers`,
    );
  }
  const minMax = new LoadBalancedPartition().partition(loads, stages);
  const actionMs = overheads.actionMs;
  const costsOf = (b: readonly number[]): StageCostTable =>
    stageCosts(layers, b, { lossMs, actionMs, ...(factors === undefined ? {} : { factors }) });
  const plan = (partition: PartitionResult): PlannedCandidate => ({
    schedule,
    partition,
    costs: costsOf(partition.boundaries),
    ...(together === undefined ? {} : {
      together: stageCosts(together.layers, partition.boundaries, { lossMs: busyLossMs, actionMs }),
    }),
  });
  const best = plan(minMax);
  if (schedule.stagesPerRank === 1) return best;
  // Several stages per rank: the cut whose busiest rank is lightest may beat min-max.
  const balanced = rankBalancedBoundaries(loads, schedule.stageToRank);
  if (balanced === null || balanced.join() === minMax.boundaries.join()) return best;
  const other = plan(new FixedPartition(balanced).partition(loads, stages));
  const time = (c: PlannedCandidate) =>
    predictStep(c.schedule, c.costs, overheads, c.together ? { together: c.together } : {}).stepMs;
  return time(other) < time(best) ? other : best;
}

function checkFactors(f: CostFactors): void {
  for (const k of ["F", "I", "W", "B"] as const) {
    const v = f?.[k];
    if (k === "B" && v === undefined) continue;
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new RangeError(`factors.${k} must be a finite number >= 0, got ${describeValue(v)}`);
    }
  }
}

// Each layer's times scaled by the factor of their kind (the step unscaled).
function scaleLayers(layers: readonly LayerTimes[], f: CostFactors): LayerTimes[] {
  return layers.map((l) => ({
    F: { median: l.F.median * f.F },
    I: { median: l.I.median * f.I },
    W: { median: l.W.median * f.W },
    ...(l.step === undefined ? {} : { step: l.step }),
  }));
}

/** The most cuts {@linkcode rankBalancedBoundaries} tries before it gives up. */
export const MAX_RANK_BALANCE_CUTS = 50_000;

/**
 * With several stages per rank: the boundaries whose busiest rank (the sum
 * of its stages' loads, `stageToRank` placing stage s) carries the least,
 * ties broken by the smaller largest stage, then the earlier cut; null
 * when there are more than {@linkcode MAX_RANK_BALANCE_CUTS} cuts to try.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { rankBalancedBoundaries } from "@conveyor/core/analysis";
 * // A V placement: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2. With heavy
 * // ends, rank 0 carries at least 4 + 4; the earliest cut that keeps it there:
 * assert.deepEqual(rankBalancedBoundaries([4, 1, 1, 1, 1, 4], [0, 1, 1, 0]), [0, 1, 2, 5, 6]);
 * // Even loads: 2 + 2 layers per rank, each stage as small as it can be.
 * assert.deepEqual(rankBalancedBoundaries([1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 0]), [0, 2, 4, 6, 8]);
 * ```
 */
export function rankBalancedBoundaries(
  loads: readonly number[],
  stageToRank: readonly number[],
): number[] | null {
  const n = loads.length;
  const S = stageToRank.length;
  if (S < 1 || n < S) return null;
  let cuts = 1;
  for (let k = 1; k < S; k++) {
    cuts = (cuts * (n - k)) / k; // C(n − 1, S − 1)
    if (cuts > MAX_RANK_BALANCE_CUTS) return null;
  }
  const prefix = [0];
  for (const l of loads) prefix.push(prefix[prefix.length - 1] + l);
  const ranks = Math.max(...stageToRank) + 1;
  const b = new Array<number>(S + 1).fill(0);
  b[S] = n;
  let best: number[] | null = null;
  let bestRank = Infinity;
  let bestLargest = Infinity;
  const sums = new Array<number>(ranks);
  const visit = (k: number): void => {
    if (k === S) {
      sums.fill(0);
      let largest = 0;
      for (let s = 0; s < S; s++) {
        const c = prefix[b[s + 1]] - prefix[b[s]];
        sums[stageToRank[s]] += c;
        if (c > largest) largest = c;
      }
      const rank = Math.max(...sums);
      if (rank < bestRank || (rank === bestRank && largest < bestLargest)) {
        bestRank = rank;
        bestLargest = largest;
        best = [...b];
      }
      return;
    }
    // Boundary k lies after boundary k − 1 and leaves a layer for each later stage.
    for (let i = b[k - 1] + 1; i <= n - (S - k); i++) {
      b[k] = i;
      visit(k + 1);
    }
  };
  if (S === 1) return [0, n];
  visit(1);
  return best;
}

/** What {@linkcode predictStep} predicts. */
export interface StepPrediction {
  /** Steady-state time per training step, ms (the median period of back-to-back steps). */
  readonly stepMs: number;
  /** Steady-state bubble over those periods. */
  readonly bubble: number;
  /** One step on its own (its makespan), ms. */
  readonly firstStepMs: number;
  /** The per-stage costs simulated (each stage's step spread over its backward actions). */
  readonly costs: ActionCosts;
}

/** Options of {@linkcode predictStep}. */
export interface PredictOptions {
  /** Steps simulated back to back (integer ≥ 2, default 8). */
  readonly iterations?: number;
  /**
   * Each stage's costs while every rank computes at once (as `costs`, from
   * a profile of P copies computing together). With it the step is
   * simulated with contention: an action runs at its `costs` rate while no
   * other rank computes, at this rate while all do, linearly in between, so
   * only the overlapped part of each action is slowed.
   */
  readonly together?: StageCostTable;
}

/**
 * Simulates `iterations` back-to-back steps (default 8) of `schedule` with
 * `costs` and the hand-over delay, and returns the median period from the
 * second step on (as the benches measure training), its bubble, and the
 * first step's makespan. Each stage's optimizer step, which runs right
 * after its last backward, is spread over its m weight-gradient actions
 * (per micro-batch its W where the schedule splits I and W, else its B;
 * a schedule may mix both in one stage): the rank's busy time is exact,
 * the order within the step approximate.
 *
 * With `together` (see {@linkcode PredictOptions}) each action is a fixed
 * amount of work done at the rate its costs give for the number of ranks
 * computing at each instant: `costs` (alone) when it is the only one,
 * `together` when all P are, `alone + (together − alone)(n − 1)/(P − 1)`
 * with n of them. Time is stepped from event to event (an action starts or
 * ends, a hand-over arrives), so the timeline is consistent: an action
 * overlapped for a share f of its work takes `(1 − f) · alone + f ·
 * together` at P = 2. The returned `costs` are then the alone ones.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import { predictStep } from "@conveyor/core/analysis";
 * const s = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
 * const c = { F: [1, 1], I: [1, 1], W: [1, 1], B: [2, 2], step: [0, 0] };
 * const p = predictStep(s, c, { actionMs: 0, handOverMs: 0 });
 * // (m + p − 1)(F + B) = 15; back to back, 1F1B's ramps do not overlap the next step's.
 * assert.equal(p.firstStepMs, 15);
 * assert.equal(p.stepMs, 15);
 * assert.ok(Math.abs(p.bubble - 0.2) < 1e-12); // 1 − 12 / 15
 * // Twice as slow while both ranks compute: only the overlapped actions stretch.
 * const both = { F: [2, 2], I: [2, 2], W: [2, 2], B: [4, 4], step: [0, 0] };
 * const q = predictStep(s, c, { actionMs: 0, handOverMs: 0 }, { together: both });
 * assert.ok(q.stepMs > 15 && q.stepMs < 30);
 * ```
 */
export function predictStep(
  schedule: Schedule,
  costs: StageCostTable,
  overheads: RuntimeOverheads,
  options: number | PredictOptions = 8,
): StepPrediction {
  const comm = checkMs("overheads.handOverMs", overheads?.handOverMs);
  const o: PredictOptions = typeof options === "number" ? { iterations: options } : options;
  if (o === null || typeof o !== "object") {
    throw new TypeError(`options must be an iteration count or an object, got ${describeValue(o)}`);
  }
  const iterations = o.iterations ?? 8;
  if (!Number.isInteger(iterations) || iterations < 2) {
    throw new RangeError(`iterations must be an integer >= 2, got ${describeValue(iterations)}`);
  }
  const S = schedule.stageToRank.length;
  for (const [name, table] of [["costs", costs], ["together", o.together]] as const) {
    if (name === "together" && table === undefined) continue;
    for (const k of ["F", "I", "W", "B", "step"] as const) {
      if (!Array.isArray(table?.[k]) || table[k].length !== S) {
        throw new RangeError(`${name}.${k} must hold one cost per stage (${S})`);
      }
      table[k].forEach((v, s) => checkMs(`${name}.${k}[${s}]`, v));
    }
  }
  const m = schedule.microBatches;
  // The runtime's cost per step and rank, shared among the rank's stages.
  const perStep = overheads.stepMs === undefined
    ? 0
    : checkMs("overheads.stepMs", overheads.stepMs);
  const held = schedule.stageToRank.map((r) => schedule.stageToRank.filter((x) => x === r).length);
  const stepOf = (c: StageCostTable, s: number) =>
    perStep > 0 ? c.step[s] + perStep / held[s] : c.step[s];
  // Each micro-batch's weight gradient of a stage is computed by exactly one
  // action, its B or its W (DualPipeV mixes both within a stage), so a
  // step's share per micro-batch goes on both kinds: m shares in all.
  const spread = (c: StageCostTable) => ({
    F: [...c.F],
    I: [...c.I],
    W: c.W.map((w, s) => w + stepOf(c, s) / m),
    B: c.B.map((b, s) => b + stepOf(c, s) / m),
  });
  const simCosts = spread(costs);
  // The plain simulator checks the schedule (structure, deadlock) in any case.
  const sim = simulate(schedule, { costs: simCosts as ActionCosts, comm, iterations });
  const events = o.together === undefined
    ? sim.events
    : simulateContention(schedule, simCosts, spread(o.together), comm, iterations);
  const sum = summarizeTimeline(events, schedule.ranks, { steadyFrom: 1 });
  const first = events.filter((e) => e.iteration === 0).reduce((a, e) => Math.max(a, e.end), 0);
  return {
    stepMs: sum.period ?? sim.makespan,
    bubble: sum.steadyStateBubble ?? sim.bubbleFraction,
    firstStepMs: first,
    costs: simCosts,
  };
}
