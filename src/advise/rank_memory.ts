/**
 * Bytes per rank of a pipeline, before it runs: the peak activation bytes
 * each rank reaches while it runs its list of actions (from each stage's
 * measured passes for one micro-batch), and the parameters, gradients,
 * optimizer state and step-check copies of the stages it holds.
 *
 * @module
 */

import type { Schedule } from "../pipeline/schedule/schedule.ts";
import type { StageMemory } from "../pipeline/partition/stage_memory.ts";
import { describeValue } from "../text/describe.ts";

/** One rank's bytes, by what holds them. */
export interface RankMemory {
  /**
   * Peak activation bytes (above parameters, gradients and optimizer
   * state): what the rank's in-flight micro-batches keep plus the
   * temporaries of the pass running at the peak.
   */
  readonly activations: number;
  /** Parameters of the rank's stages. */
  readonly parameters: number;
  /** Their gradients (as many bytes as the parameters). */
  readonly gradients: number;
  /** The optimizer's state for them (AdamW: two moments per parameter). */
  readonly optimizerState: number;
  /** Copies of parameters and optimizer state the step check keeps from a step to its verdict. */
  readonly stepCopies: number;
  /** The sum of the above. */
  readonly total: number;
}

/** Bytes of one layer outside activations (see {@linkcode rankMemory}). */
export interface LayerBytes {
  /** Its parameters' bytes. */
  readonly paramBytes: number;
  /** Its optimizer state's bytes (absent: 0). */
  readonly optimizerStateBytes?: number;
  /** What the step check copies of it (absent: 0). */
  readonly stepCopyBytes?: number;
}

function checkStages(schedule: Schedule, stages: readonly StageMemory[]): void {
  const S = schedule.stageToRank.length;
  if (!Array.isArray(stages) || stages.length !== S) {
    throw new RangeError(
      `stages must hold one StageMemory per stage (${S}), got ${
        Array.isArray(stages) ? stages.length : typeof stages
      }`,
    );
  }
  stages.forEach((c, s) => {
    for (const k of Object.keys(ZERO) as (keyof StageMemory)[]) {
      const v = c?.[k];
      if (typeof v !== "number" || !Number.isFinite(v)) {
        throw new RangeError(`stages[${s}].${k} must be a finite number, got ${describeValue(v)}`);
      }
    }
  });
}

const ZERO: StageMemory = {
  forwardPeak: 0,
  afterForward: 0,
  inputGradPeak: 0,
  afterInputGrad: 0,
  weightGradPeak: 0,
  backwardPeak: 0,
};

/**
 * Peak activation bytes of each rank of `schedule`, walking its list in
 * order with one micro-batch's figures per stage (`stages[s]`): F raises
 * the held bytes by `afterForward` (peak: held + `forwardPeak`); I turns
 * them into `afterInputGrad` (peak: held + `inputGradPeak`); W releases
 * `afterInputGrad` (peak: held + `weightGradPeak`); B releases
 * `afterForward` (peak: held + `backwardPeak`). A rank runs one action at
 * a time and starts each iteration with nothing held, so the order alone
 * fixes its peak.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import { activationPeaks } from "@conveyor/core/analysis";
 * const stage = {
 *   forwardPeak: 150, afterForward: 100, inputGradPeak: 60, afterInputGrad: 40,
 *   weightGradPeak: 10, backwardPeak: 40,
 * };
 * // GPipe holds all 4 micro-batches: 3 · 100 held when the 4th forward peaks.
 * const gpipe = generateSchedule("gpipe", { ranks: 2, microBatches: 4 });
 * assert.deepEqual(activationPeaks(gpipe, [stage, stage]), [450, 450]);
 * // 1F1B at 2 ranks holds 2 on rank 0: 100 held when the second forward peaks at 150.
 * const oneFOneB = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
 * assert.deepEqual(activationPeaks(oneFOneB, [stage, stage]), [250, 150]);
 * ```
 */
export function activationPeaks(schedule: Schedule, stages: readonly StageMemory[]): number[] {
  checkStages(schedule, stages);
  return schedule.actions.map((list) => {
    let held = 0;
    let peak = 0;
    for (const a of list) {
      const c = stages[a.stage];
      const during = a.kind === "F"
        ? c.forwardPeak
        : a.kind === "I"
        ? c.inputGradPeak
        : a.kind === "W"
        ? c.weightGradPeak
        : c.backwardPeak;
      peak = Math.max(peak, held + during);
      if (a.kind === "F") held += c.afterForward;
      else if (a.kind === "I") held += c.afterInputGrad - c.afterForward;
      else if (a.kind === "W") held -= c.afterInputGrad;
      else held -= c.afterForward;
    }
    return peak;
  });
}

/**
 * Every rank's bytes: activations from {@linkcode activationPeaks}, and
 * for the layers of the stages it holds (stage s is layers
 * `[boundaries[s], boundaries[s + 1])`, on rank `stageToRank[s]`) their
 * parameters, as many bytes of gradients, their optimizer state, and with
 * `stepCheck` the step-check copies. With `shardOptimizer` D (ZeRO-1: the D
 * replicas of each rank share the optimizer state) a rank holds 1/D of the
 * optimizer state, plus the working copy of its share (1/D of the
 * parameters, counted with them, and of the gradients), and its step-check
 * copies are its share's (1/D) plus the whole stage's parameters.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import { rankMemory } from "@conveyor/core/analysis";
 * const s = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
 * const layers = [100, 200, 300].map((b) => ({ paramBytes: b, optimizerStateBytes: 2 * b, stepCopyBytes: 3 * b }));
 * const stage = { forwardPeak: 10, afterForward: 10, inputGradPeak: 0, afterInputGrad: 0, weightGradPeak: 0, backwardPeak: 0 };
 * const [r0, r1] = rankMemory(s, [0, 2, 3], layers, [stage, stage], { stepCheck: true });
 * assert.deepEqual(r0, {
 *   activations: 20, parameters: 300, gradients: 300, optimizerState: 600, stepCopies: 900, total: 2120,
 * });
 * assert.equal(r1.total, 300 + 300 + 600 + 900 + 10);
 * ```
 */
export function rankMemory(
  schedule: Schedule,
  boundaries: readonly number[],
  layers: readonly LayerBytes[],
  stages: readonly StageMemory[],
  options: { readonly stepCheck?: boolean; readonly shardOptimizer?: number } = {},
): RankMemory[] {
  const d = options.shardOptimizer ?? 1;
  if (!Number.isInteger(d) || d < 1) {
    throw new RangeError(
      `shardOptimizer must be the replicas D sharing the optimizer (a positive integer), got ${
        describeValue(options.shardOptimizer)
      }`,
    );
  }
  const S = schedule.stageToRank.length;
  if (!Array.isArray(boundaries) || boundaries.length !== S + 1) {
    throw new RangeError(
      `boundaries must hold stages + 1 = ${S + 1} entries, got ${
        Array.isArray(boundaries) ? boundaries.length : typeof boundaries
      }`,
    );
  }
  if (boundaries[0] !== 0 || boundaries[S] !== layers.length) {
    throw new RangeError(
      `boundaries must run from 0 to the layer count ${layers.length}, got [${
        boundaries.join(", ")
      }]`,
    );
  }
  for (let s = 0; s < S; s++) {
    if (!(Number.isInteger(boundaries[s + 1]) && boundaries[s + 1] > boundaries[s])) {
      throw new RangeError(`boundaries must be strictly increasing integers, got [${boundaries}]`);
    }
  }
  const acts = activationPeaks(schedule, stages);
  const out = acts.map((activations) => ({
    activations,
    parameters: 0,
    gradients: 0,
    optimizerState: 0,
    stepCopies: 0,
  }));
  for (let s = 0; s < S; s++) {
    const r = out[schedule.stageToRank[s]];
    for (let i = boundaries[s]; i < boundaries[s + 1]; i++) {
      const l = layers[i];
      // Sharded (d > 1): the share's working values and gradients besides the whole stage's.
      const share = d === 1 ? 0 : l.paramBytes / d;
      r.parameters += l.paramBytes + share;
      r.gradients += l.paramBytes + share;
      r.optimizerState += (l.optimizerStateBytes ?? 0) / d;
      if (options.stepCheck === true) {
        r.stepCopies += (l.stepCopyBytes ?? 0) / d + (d === 1 ? 0 : l.paramBytes);
      }
    }
  }
  return out.map((r) => ({
    ...r,
    total: r.activations + r.parameters + r.gradients + r.optimizerState + r.stepCopies,
  }));
}
