/**
 * "Which schedule for my model?": {@linkcode adviseSchedule} measures the
 * user's own model (every layer's F, I and W, its optimizer step, each
 * stage's activation bytes, the runtime's hand-over and per-action costs)
 * in workers, alone and computing at once as a pipeline's ranks do, predicts every
 * candidate schedule's step time and bytes per rank, ranks them, and can
 * train the best few for real to set the measurement beside the prediction.
 *
 * @module
 */

import type { Sequential } from "../../nn/sequential.ts";
import { saveSafetensors } from "../../nn/safetensors.ts";
import type { OptimizerSpec } from "../../nn/optimizer_spec.ts";
import type { PassProfile } from "../partition/layer_passes.ts";
import type { StageMemory } from "../partition/stage_memory.ts";
import { WorkerRankGroup } from "../runtime/worker_rank_group.ts";
import { rankMemory } from "../advise/rank_memory.ts";
import { withTiedCopies, withTiedSum } from "./_tied_placement.ts";
import { planCandidate, predictStep, type RuntimeOverheads } from "../advise/step_prediction.ts";
import { type AdviceCandidate, rankCandidates } from "../advise/advice_table.ts";
import { prod, type TrainingBatch } from "./batch.ts";
import { type AdviseOptions, checkAdvise } from "./_advise_options.ts";
import type { PipelineLoss } from "./model_rank_executor.ts";
import {
  ADVISE_EXECUTOR_URL,
  type AdviseCalls,
  type AdviseRankOptions,
} from "./_advise_executor.ts";
import { calibrationSchedule, measureOverheads, profileOnRanks } from "./_advise_profile.ts";
import { measureCandidate } from "./_advise_verify.ts";
import { calibrate, calibrationRuns, planCalibrated, predictPlan } from "./_advise_calibrate.ts";
import type { AdviceCalibration } from "../advise/calibration.ts";
import { tuneMatmulForRanks } from "./_matmul_tuning.ts";

export type { AdviseOptions };

// Untimed steps of each calibration run: a fresh worker's first steps run
// slower while V8 compiles the kernels (the tiny GPT's ZB-H1 at P = 2 here:
// 1190, 980, 950, then 920–940 ms), and the calibration must see the
// steady state that a training run and the advice's verification see.
const CALIBRATION_WARMUP = 3;

/** One profile the advice is built on. */
export interface AdviceProfile {
  /** Ranks of the candidates it served. */
  readonly ranks: number;
  /** Copies of the model computing at once while it was measured. */
  readonly concurrency: number;
  /** The measurement (its `spread` says how much the sweeps differed). */
  readonly profile: PassProfile;
  /** The runtime's costs measured beside it. */
  readonly overheads: RuntimeOverheads;
}

/** A candidate that could not be built, and why. */
export interface SkippedCandidate {
  /** Schedule name. */
  readonly schedule: string;
  /** Ranks. */
  readonly ranks: number;
  /** Micro-batches. */
  readonly microBatches: number;
  /** The generator's or partitioner's refusal. */
  readonly reason: string;
}

/** What {@linkcode adviseSchedule} returns. */
export interface Advice {
  /** Every candidate, ranked: within the memory limit first, then by predicted ms per step. */
  readonly candidates: readonly AdviceCandidate[];
  /** Combinations no schedule could be built for. */
  readonly skipped: readonly SkippedCandidate[];
  /**
   * The profiles: per rank count and micro-batch size, one copy alone, then
   * (unless `concurrent` is false, or at 1 rank) P copies at once.
   */
  readonly profiles: readonly AdviceProfile[];
  /** The calibrations (one per rank count where `calibrate` ran), with their check. */
  readonly calibrations: readonly AdviceCalibration[];
  /** Wall time of the advice (verification included), ms. */
  readonly elapsedMs: number;
  /** Wall time until the ranked predictions (without verification), ms. */
  readonly predictionMs: number;
}

/**
 * Measures `model` on `sample` (one training batch) and predicts, for every
 * candidate (each schedule at each rank count and micro-batch count), the
 * time per training step in steady state, the bubble, and the peak bytes
 * per rank (activations, parameters, gradients, optimizer state and the
 * step check's copies); returns them ranked, fitting `memoryLimit` first,
 * then fastest first. Everything is checked before any work.
 *
 * How: for each rank count P, P workers each rebuild the model; one of
 * them profiles every layer alone (F, I, W, the loss, each layer's
 * optimizer step; `repeats` sweeps after `warmup`), then all P at once, so
 * that the passes are timed alone and under the load of P ranks computing
 * together (the step is simulated with contention between them: only the
 * overlapped part of an action is slowed); the hand-over delay and the
 * runtime's cost per action are measured between them. Each candidate's
 * layers are cut by the exact min-max partition of their measured loads,
 * each stage's activation bytes for one micro-batch are measured
 * (`profileStageMemory`) and walked through each rank's list of actions
 * (`activationPeaks`), and the step is simulated (`predictStep`). Unless
 * `calibrate` is false, short real runs (1F1B, ZB-H1) first fit each action
 * kind's ratio of measured to profiled time and the runtime's costs
 * (`fitCalibration`, reported in `calibrations`); every candidate is then
 * cut and simulated with those, without contention (the ratios carry it),
 * and keeps the profile-only prediction as `uncalibratedMs`. With
 * `verify: k` the best k are trained for real (`PipelineParallelModel` in
 * workers, with the predicted partition) and carry `measuredMs`,
 * `measuredBubble` and `measuredActivationBytes`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, ReLU, Sequential } from "@conveyor/core";
 * import { adviseSchedule } from "@conveyor/core/analysis";
 * const be = new CpuBackend();
 * const net = new Sequential([
 *   new Linear(be, 8, 32, { seed: 1 }), new ReLU(be), new Linear(be, 32, 32, { seed: 2 }),
 *   new ReLU(be), new Linear(be, 32, 1, { seed: 3 }),
 * ]);
 * const sample = { inputs: new Float32Array(16 * 8).fill(0.5), shape: [16, 8], targets: new Float32Array(16) };
 * const advice = await adviseSchedule(net, sample, {
 *   loss: "mse", schedules: ["gpipe", "1f1b", "zb-h1"], ranks: 2, microBatches: 4, repeats: 2,
 * });
 * assert.equal(advice.candidates.length, 3);
 * const best = advice.candidates[0];
 * assert.ok(best.predictedMs > 0 && best.peakBytes.length === 2);
 * assert.ok(advice.candidates.every((c, i) => i === 0 || c.predictedMs >= advice.candidates[i - 1].predictedMs));
 * net.dispose();
 * ```
 */
export async function adviseSchedule(
  model: Sequential,
  sample: TrainingBatch,
  options: AdviseOptions,
): Promise<Advice> {
  const t0 = performance.now();
  const o = checkAdvise(model, sample, options);
  const progress = options.onProgress ?? (() => {});
  const rowsFor = (m: number) => Math.ceil(sample.shape[0] / m);
  const shapes = model.shapes([...sample.shape]);
  const L = model.layers.length;
  // Activations handed between ranks: a typical layer output of a micro-batch.
  const perRow = shapes.slice(0, Math.max(1, L - 1)).map((s) => prod(s.slice(1))).sort((a, b) =>
    a - b
  );
  const handOverFloats = perRow[perRow.length >> 1] * rowsFor(o.microBatches[0]);
  const tunedMatmul = await tuneMatmulForRanks(o.backend);
  const rankOptions: AdviseRankOptions = {
    spec: model.spec(),
    weights: await saveSafetensors(model.parameters()),
    backend: o.backend,
    ...(tunedMatmul === undefined ? {} : { tunedMatmul }),
    modules: o.modules,
    loss: o.loss,
    optimizer: o.optimizer,
    stepCheck: o.nonFinite !== "off",
    inputs: sample.inputs,
    shape: [...sample.shape],
    targets: sample.targets,
    targetTail: o.targetTail,
    lossRows: o.lossRows,
    handOverFloats,
  };
  const candidates: AdviceCandidate[] = [];
  const skipped: SkippedCandidate[] = [];
  const profiles: AdviceProfile[] = [];
  const calibrations: AdviceCalibration[] = [];
  const openGroup = (ranks: number) =>
    WorkerRankGroup.create<AdviseCalls>({
      schedule: calibrationSchedule(ranks),
      executor: { module: ADVISE_EXECUTOR_URL, options: rankOptions },
    });
  for (const P of o.ranks) {
    const profiler = await openGroup(P);
    let group: WorkerRankGroup<AdviseCalls> | null = profiler;
    try {
      const together = o.concurrent && P > 1;
      const overheads = await measureOverheads(profiler, handOverFloats);
      const byRows = new Map<number, { alone: PassProfile; together?: PassProfile }>();
      for (const rows of new Set(o.microBatches.map(rowsFor))) {
        const profileWith = async (copies: number) => {
          progress(`profiling ${L} layers, ${rows}-row micro-batches, ${copies} at once`);
          const profile = await profileOnRanks(
            profiler,
            copies,
            rows,
            o.repeats,
            o.warmup,
            o.profileMs,
          );
          profiles.push({ ranks: P, concurrency: copies, profile, overheads });
          return profile;
        };
        const alone = await profileWith(1);
        byRows.set(rows, together ? { alone, together: await profileWith(P) } : { alone });
      }
      const togetherOf = (busy: PassProfile | undefined) =>
        busy === undefined ? undefined : { layers: busy.layers, lossMs: busy.loss?.median ?? 0 };
      let cal: AdviceCalibration | null = null;
      if (o.calibrate) {
        // The profiling workers go before the calibration runs: idle, they
        // would collect their heaps (V8's memory reducer) on the cores the
        // runs measure; a one-rank group comes back for the memory below.
        await profiler.dispose();
        group = null;
        const m0 = o.microBatches[0];
        const { alone, together: busy } = byRows.get(rowsFor(m0))!;
        const at = { ranks: P, microBatches: m0, profile: alone, overheads };
        const runs = calibrationRuns(o.schedules, P, m0);
        const run = { ...o, warmup: CALIBRATION_WARMUP, steps: o.calibrateSteps };
        cal = await calibrate(
          model,
          sample,
          runs,
          { ...at, together: togetherOf(busy) },
          run,
          progress,
        );
        if (cal !== null) calibrations.push(cal);
      }
      const memo = new Map<string, StageMemory[]>();
      for (const m of o.microBatches) {
        const { alone: profile, together: busy } = byRows.get(rowsFor(m))!;
        for (const name of o.schedules) {
          let plan;
          let uncalibratedMs: number | undefined;
          try {
            const lossMs = profile.loss?.median ?? 0;
            plan = planCandidate(name, P, m, profile.layers, overheads, lossMs, togetherOf(busy));
            if (cal !== null) {
              uncalibratedMs = predictPlan(plan, overheads);
              plan = planCalibrated(name, P, m, profile, cal);
            }
          } catch (e) {
            if (!(e instanceof RangeError || e instanceof TypeError)) throw e;
            skipped.push({ schedule: name, ranks: P, microBatches: m, reason: e.message });
            continue;
          }
          const b = plan.partition.boundaries;
          const key = `${rowsFor(m)}:${b.join(",")}`;
          let stages = memo.get(key);
          if (stages === undefined) {
            group ??= await openGroup(1);
            stages = await group.call(0, "stageMemory", { rows: rowsFor(m), boundaries: b });
            memo.set(key, stages);
          }
          const where = plan.schedule.stageToRank;
          const bytes = withTiedCopies(model, profile.layers, b, where);
          const memory = withTiedSum(
            model,
            rankMemory(plan.schedule, b, bytes, stages, { stepCheck: o.nonFinite !== "off" }),
            b,
            where,
          );
          const step = predictStep(
            plan.schedule,
            plan.costs,
            cal?.overheads ?? overheads,
            plan.together === undefined ? {} : { together: plan.together },
          );
          const peakBytes = memory.map((r) => r.total);
          const c: AdviceCandidate = {
            schedule: name,
            ranks: P,
            microBatches: m,
            stagesPerRank: plan.schedule.stagesPerRank,
            boundaries: [...b],
            predictedMs: step.stepMs,
            bubble: step.bubble,
            peakBytes,
            memory,
            fits: peakBytes.every((x) => x <= o.memoryLimit),
            generated: plan.schedule,
            ...(cal === null ? {} : {
              uncalibratedMs,
              calibration: { factors: cal.factors, ...cal.overheads },
            }),
          };
          candidates.push(c);
        }
      }
    } finally {
      await group?.dispose();
    }
  }
  const ranked = rankCandidates(candidates);
  const predictionMs = performance.now() - t0;
  const out: AdviceCandidate[] = [];
  for (let i = 0; i < ranked.length; i++) {
    const c = ranked[i];
    if (i >= o.verify) {
      out.push(c);
      continue;
    }
    progress(`verifying ${c.schedule} at ${c.ranks} ranks, ${c.microBatches} micro-batches`);
    const r = await measureCandidate(model, sample, c.generated!, c.boundaries, {
      loss: o.loss,
      optimizer: o.optimizer,
      backend: o.backend,
      modules: o.modules,
      nonFinite: o.nonFinite,
      warmup: o.verifyWarmup,
      steps: o.verifySteps,
    });
    out.push({
      ...c,
      measuredMs: r.stepMs,
      measuredBubble: r.bubble,
      measuredActivationBytes: r.activationBytes,
    });
  }
  return {
    candidates: out,
    skipped,
    profiles,
    calibrations,
    elapsedMs: performance.now() - t0,
    predictionMs,
  };
}

/**
 * What a model module for `cli.ts advise --model PATH` returns from its
 * default export (or `createAdviseModel`), given the backend to build on.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, Sequential } from "@conveyor/core";
 * import { type Backend } from "@conveyor/core/tensor";
 * import { type AdviseModule } from "@conveyor/core/analysis";
 * // The module's default export:
 * function createAdviseModel(be: Backend): AdviseModule {
 *   return {
 *     model: new Sequential([new Linear(be, 4, 2, { seed: 1 })]),
 *     sample: { inputs: new Float32Array(32), shape: [8, 4], targets: new Float32Array(16) },
 *     loss: "mse",
 *   };
 * }
 * const m = createAdviseModel(new CpuBackend());
 * assert.equal(m.model.parameters().length, 2);
 * m.model.dispose();
 * ```
 */
export interface AdviseModule {
  /** The model (a `Sequential` whose layers all have a spec). */
  readonly model: Sequential;
  /** One training batch: its rows are cut into the micro-batches. */
  readonly sample: TrainingBatch;
  /** The loss on the last stage. */
  readonly loss: PipelineLoss;
  /** The optimizer (default AdamW, lr 1e-3, weight decay 0). */
  readonly optimizer?: OptimizerSpec;
}
