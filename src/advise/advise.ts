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

import type { Sequential } from "../nn/sequential.ts";
import { saveSafetensors } from "../nn/safetensors.ts";
import type { OptimizerSpec } from "../nn/optimizer_spec.ts";
import type { PassProfile } from "../pipeline/partition/layer_passes.ts";
import type { StageMemory } from "../pipeline/partition/stage_memory.ts";
import { WorkerRankGroup } from "../pipeline/runtime/worker_rank_group.ts";
import { rankMemory } from "./rank_memory.ts";
import { withTiedCopies, withTiedSum } from "./_tied_bytes.ts";
import { planCandidate, predictStep, type RuntimeOverheads } from "./step_prediction.ts";
import {
  type AdviceCandidate,
  distinctRuns,
  markTies,
  pipelineVerdict,
  rankCandidates,
} from "./advice_table.ts";
import { checkFinite, describeArray, prod, type TrainingBatch } from "../pipeline/model/batch.ts";
import type { PipelineLoss } from "../pipeline/model/model_rank_executor.ts";
import { ADVISE_EXECUTOR_URL, type AdviseCalls, type AdviseRankOptions } from "./_executor.ts";
import { calibrationSchedule, measureOverheads, profileOnRanks } from "./_profile.ts";
import { measureCandidate } from "./_verify.ts";
import { calibrate, calibrationRuns, planCalibrated, predictPlan } from "./_calibrate.ts";
import type { AdviceCalibration } from "./calibration.ts";
import { tuneMatmulForRanks } from "../pipeline/model/matmul_tuning.ts";
import type { NonFinitePolicy } from "../pipeline/runtime/run_policy.ts";
import { Sequential as SequentialClass } from "../nn/sequential.ts";
import { checkOptimizerSpec } from "../nn/optimizer_spec.ts";
import type { BackendKind } from "../tensor/create_backend.ts";
import { describeValue } from "../text/describe.ts";
import { checkOptionSpelling } from "../text/nearest.ts";
import { SCHEDULE_NAMES, type ScheduleName } from "../pipeline/schedule/generate.ts";
import { threadsPerRank } from "../tensor/cpu/backend_options.ts";

// The options of adviseSchedule and their check, before any work: each value
// against its rule, the error naming the value.

// A string in quotes (the value as written), anything else described.
const quote = (v: unknown): string => typeof v === "string" ? JSON.stringify(v) : describeValue(v);

const ADVISE_OPTIONS: readonly (keyof AdviseOptions)[] = [
  "loss",
  "optimizer",
  "schedules",
  "ranks",
  "microBatches",
  "backend",
  "memoryLimit",
  "shardOptimizer",
  "repeats",
  "warmup",
  "profileMs",
  "concurrent",
  "calibrate",
  "calibrateSteps",
  "nonFinite",
  "verify",
  "verifyWarmup",
  "verifySteps",
  "modules",
  "onProgress",
];

/** Options of {@linkcode adviseSchedule}. */
export interface AdviseOptions {
  /** The loss on the last stage, as `PipelineParallelModel` takes it. */
  readonly loss: PipelineLoss;
  /** Optimizer of every stage (default AdamW, lr 1e-3, weight decay 0). */
  readonly optimizer?: OptimizerSpec;
  /** Schedules to consider (default every one of `SCHEDULE_NAMES`). */
  readonly schedules?: readonly string[];
  /** Rank counts to consider (default 1 and 2: one rank shows whether pipelining pays). */
  readonly ranks?: number | readonly number[];
  /** Micro-batch counts to consider (default 8; each at most the sample's rows). */
  readonly microBatches?: number | readonly number[];
  /** Backend of every rank (default `"cpu"`). */
  readonly backend?: BackendKind;
  /** Bytes one rank may hold; candidates over it rank after those within (default none). */
  readonly memoryLimit?: number;
  /**
   * ZeRO-1: the D data-parallel replicas that will share each rank's
   * optimizer state (`shardOptimizer` with `dataParallel` D): the byte
   * table counts 1/D of it per rank, with the share's working copies
   * (default 1: whole).
   */
  readonly shardOptimizer?: number;
  /** Timed sweeps per profile (integer ≥ 1, default 5). */
  readonly repeats?: number;
  /** Untimed sweeps first (integer ≥ 0, default 1). */
  readonly warmup?: number;
  /**
   * Sweep past `repeats` until the timed sweeps take this long, ms (at most
   * 20 × `repeats` sweeps; default 1000): small models get enough samples.
   */
  readonly profileMs?: number;
  /**
   * Profile also with P copies of the model computing at once, one per
   * worker (default true): each pass is timed alone and beside the other
   * ranks (they share the cores' memory bandwidth and caches), and the step
   * is simulated with contention: each action runs at its alone rate while
   * no other rank computes and at its together rate while all do, so only
   * the overlapped part of it is slowed. With false one worker profiles
   * alone and the simulation takes those times throughout.
   */
  readonly concurrent?: boolean;
  /**
   * Calibrate against a short real pipeline (default true): after the
   * profile, 1F1B (where a candidate runs full backwards) and ZB-H1 (where
   * one splits I and W) train for real in workers at each rank count and
   * the first of `microBatches`, three warm-up steps and `calibrateSteps`
   * measured; each action kind's median ratio of measured to profiled
   * time, and the runtime's costs read off those runs, then predict every
   * candidate (their spans carry what the profile cannot: the ranks' real
   * contention, the executor's own work); `calibrations` reports the fit,
   * each candidate's `uncalibratedMs` the profile-only prediction, which
   * is what `predictedMs` is with false.
   */
  readonly calibrate?: boolean;
  /** Measured steps of each calibration run (integer ≥ 2, default 3). */
  readonly calibrateSteps?: number;
  /** As `PipelineParallelModel`'s `nonFinite` (default `"skip"`): its check copies and times. */
  readonly nonFinite?: NonFinitePolicy;
  /** Train the best `verify` candidates for real and report the measurement (default 0). */
  readonly verify?: number;
  /** Warm-up steps of each verification (default 2). */
  readonly verifyWarmup?: number;
  /** Measured steps of each verification, back to back (integer ≥ 2, default 8). */
  readonly verifySteps?: number;
  /** Modules every worker imports first (they register the model's own layers). */
  readonly modules?: readonly (string | URL)[];
  /** Called with a line of progress now and then. */
  readonly onProgress?: (message: string) => void;
}

function list(name: string, v: unknown, fallback: readonly number[]): number[] {
  const xs = v === undefined ? fallback : typeof v === "number" ? [v] : v;
  if (!Array.isArray(xs) || xs.length === 0) {
    throw new TypeError(`${name} must be a positive integer or a non-empty array of them`);
  }
  for (const x of xs) {
    if (typeof x !== "number" || !Number.isInteger(x) || x < 1) {
      throw new RangeError(`${name} must hold positive integers, got ${describeValue(x)}`);
    }
  }
  return [...new Set(xs as number[])];
}

function int(name: string, v: unknown, fallback: number, min: number): number {
  const x = v ?? fallback;
  if (typeof x !== "number" || !Number.isInteger(x) || x < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${describeValue(v)}`);
  }
  return x;
}

function checkProfileMs(v: unknown): number {
  const x = v ?? 1000;
  if (typeof x !== "number" || !(x >= 0) || !Number.isFinite(x)) {
    throw new RangeError(`profileMs must be a finite number of ms >= 0, got ${describeValue(v)}`);
  }
  return x;
}

interface CheckedAdvise {
  readonly loss: PipelineLoss;
  readonly optimizer: OptimizerSpec;
  readonly schedules: ScheduleName[];
  readonly ranks: number[];
  readonly microBatches: number[];
  readonly backend: BackendKind;
  readonly memoryLimit: number;
  readonly shardOptimizer: number;
  readonly repeats: number;
  readonly warmup: number;
  readonly profileMs: number;
  readonly concurrent: boolean;
  readonly calibrate: boolean;
  readonly calibrateSteps: number;
  readonly nonFinite: NonFinitePolicy;
  readonly verify: number;
  readonly verifyWarmup: number;
  readonly verifySteps: number;
  readonly modules: string[];
  readonly targetTail: number[];
  readonly lossRows: number;
}

function checkAdvise(
  model: Sequential,
  sample: TrainingBatch,
  o: AdviseOptions,
): CheckedAdvise {
  if (!(model instanceof SequentialClass)) {
    throw new TypeError(`model must be a Sequential, got ${describeValue(model)}`);
  }
  if (o === null || typeof o !== "object") {
    throw new TypeError(`options must be an object { loss, ... }, got ${describeValue(o)}`);
  }
  checkOptionSpelling(o, ADVISE_OPTIONS, "adviseSchedule: ");
  if (o.loss !== "cross-entropy" && o.loss !== "mse") {
    throw new TypeError(`loss must be "cross-entropy" or "mse", got ${quote(o.loss)}`);
  }
  const optimizer = checkOptimizerSpec(
    o.optimizer ?? { kind: "adamw", lr: 1e-3, weightDecay: 0 },
  );
  const schedules = (o.schedules ?? SCHEDULE_NAMES) as readonly unknown[];
  if (!Array.isArray(schedules) || schedules.length === 0) {
    throw new TypeError("schedules must be a non-empty array of schedule names");
  }
  for (const s of schedules) {
    if (!(SCHEDULE_NAMES as readonly unknown[]).includes(s)) {
      throw new RangeError(
        `schedules must be names from ${SCHEDULE_NAMES.join(", ")}, got ${quote(s)}`,
      );
    }
  }
  const backend = o.backend ?? "cpu";
  if (backend !== "auto" && backend !== "cpu" && backend !== "webgpu") {
    throw new RangeError(
      `backend must be "auto", "cpu" or "webgpu", got ${quote(backend)}`,
    );
  }
  const memoryLimit = o.memoryLimit ?? Infinity;
  if (typeof memoryLimit !== "number" || !(memoryLimit > 0)) {
    throw new RangeError(
      `memoryLimit must be a number of bytes > 0, got ${describeValue(o.memoryLimit)}`,
    );
  }
  const concurrent = o.concurrent ?? true;
  if (typeof concurrent !== "boolean") {
    throw new TypeError(`concurrent must be a boolean, got ${describeValue(concurrent)}`);
  }
  const calibrate = o.calibrate ?? true;
  if (typeof calibrate !== "boolean") {
    throw new TypeError(`calibrate must be a boolean, got ${quote(calibrate)}`);
  }
  const nonFinite = o.nonFinite ?? "skip";
  if (nonFinite !== "skip" && nonFinite !== "throw" && nonFinite !== "off") {
    throw new TypeError(
      `nonFinite must be "skip", "throw" or "off", got ${quote(nonFinite)}`,
    );
  }
  if (o.onProgress !== undefined && typeof o.onProgress !== "function") {
    throw new TypeError(`onProgress must be a function, got ${describeValue(o.onProgress)}`);
  }
  const modules = (o.modules ?? []).map((m, i) => {
    if (typeof m !== "string" && !(m instanceof URL)) {
      throw new TypeError(`modules[${i}] must be a URL or a string, got ${describeValue(m)}`);
    }
    return String(m);
  });
  // The sample, as a training batch of this model.
  if (sample === null || typeof sample !== "object" || !Array.isArray(sample.shape)) {
    throw new TypeError(
      `sample must be a batch { inputs, shape, targets }, got ${describeValue(sample)}`,
    );
  }
  const shape = [...sample.shape];
  if (!(sample.inputs instanceof Float32Array) || sample.inputs.length !== prod(shape)) {
    throw new RangeError(
      `sample.inputs must be a Float32Array of ${prod(shape)} values for shape [${shape}], got ${
        describeArray(sample.inputs)
      }`,
    );
  }
  checkFinite(sample.inputs, "sample.inputs");
  const shapes = model.shapes(shape);
  const out = shapes[shapes.length - 1];
  const targetShape = o.loss === "mse" ? out : out.slice(0, -1);
  if (!(sample.targets instanceof Float32Array) || sample.targets.length !== prod(targetShape)) {
    throw new RangeError(
      `sample.targets must be a Float32Array of ${
        prod(targetShape)
      } values (shape [${targetShape}] for ${o.loss}), got ${describeArray(sample.targets)}`,
    );
  }
  if (o.loss === "cross-entropy") {
    const V = out[out.length - 1];
    const t = sample.targets;
    for (let i = 0; i < t.length; i++) {
      if (!Number.isInteger(t[i]) || t[i] < 0 || t[i] >= V) {
        throw new RangeError(
          `sample.targets[${i}] is ${
            t[i]
          }: cross-entropy targets are class ids, integers in [0, ${V})`,
        );
      }
    }
  } else checkFinite(sample.targets, "sample.targets");
  const microBatches = list("microBatches", o.microBatches, [8]);
  for (const m of microBatches) {
    if (m > shape[0]) {
      throw new RangeError(
        `microBatches ${m} is more than the sample's ${
          shape[0]
        } rows: each micro-batch needs a row`,
      );
    }
  }
  return {
    loss: o.loss,
    optimizer,
    schedules: [...new Set(schedules as ScheduleName[])],
    ranks: list("ranks", o.ranks, [1, 2]),
    microBatches,
    backend,
    memoryLimit,
    shardOptimizer: int("shardOptimizer", o.shardOptimizer, 1, 1),
    repeats: int("repeats", o.repeats, 5, 1),
    warmup: int("warmup", o.warmup, 1, 0),
    profileMs: checkProfileMs(o.profileMs),
    concurrent,
    calibrate,
    calibrateSteps: int("calibrateSteps", o.calibrateSteps, 3, 2),
    nonFinite,
    verify: int("verify", o.verify, 0, 0),
    verifyWarmup: int("verifyWarmup", o.verifyWarmup, 2, 0),
    verifySteps: int("verifySteps", o.verifySteps, 8, 2),
    modules,
    targetTail: targetShape.slice(1),
    lossRows: prod(out.slice(0, -1)),
  };
}

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
  /**
   * With candidates at one rank and at more: one line saying whether
   * pipelining pays for this model (see `pipelineVerdict`).
   */
  readonly verdict?: string;
}

/**
 * Measures `model` on `sample` (one training batch) and predicts, for every
 * candidate (each schedule at each rank count, by default 1 and 2, and
 * micro-batch count; each distinct run once, see `distinctRuns`), the
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
      // Each rank's CPU threads as a pipeline of that many ranks gets them:
      // one rank computes on every core, P ranks share the cores.
      executor: {
        module: ADVISE_EXECUTOR_URL,
        options: { ...rankOptions, threads: threadsPerRank(ranks) },
      },
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
            rankMemory(plan.schedule, b, bytes, stages, {
              stepCheck: o.nonFinite !== "off",
              shardOptimizer: o.shardOptimizer,
            }),
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
            spreadMs: step.stepMs * (cal?.spread ?? profile.spread) / 2,
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
  // Each distinct run once, ranked; those it cannot tell from the first marked.
  const ranked = markTies(rankCandidates(distinctRuns(candidates)));
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
    ...(verdictOf(out)),
  };
}

function verdictOf(candidates: readonly AdviceCandidate[]): { verdict?: string } {
  const verdict = pipelineVerdict(candidates);
  return verdict === undefined ? {} : { verdict };
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
