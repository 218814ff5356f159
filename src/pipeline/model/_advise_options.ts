// The options of adviseSchedule (advise.ts re-exports them) and their
// check, before any work: each value against its rule, the error naming
// the value.

import type { NonFinitePolicy } from "../runtime/run_policy.ts";
import type { Sequential } from "../../nn/sequential.ts";
import { Sequential as SequentialClass } from "../../nn/sequential.ts";
import { checkOptimizerSpec, type OptimizerSpec } from "../../nn/optimizer_spec.ts";
import type { BackendKind } from "../../tensor/create_backend.ts";
import { describeValue } from "../../text/describe.ts";
import { SCHEDULE_NAMES, type ScheduleName } from "../schedule/generate.ts";
import { checkFinite, describeArray, prod, type TrainingBatch } from "./batch.ts";
import type { PipelineLoss } from "./model_rank_executor.ts";

// A string in quotes (the value as written), anything else described.
const quote = (v: unknown): string => typeof v === "string" ? JSON.stringify(v) : describeValue(v);

/** Options of {@linkcode adviseSchedule}. */
export interface AdviseOptions {
  /** The loss on the last stage, as `PipelineParallelModel` takes it. */
  readonly loss: PipelineLoss;
  /** Optimizer of every stage (default AdamW, lr 1e-3, weight decay 0). */
  readonly optimizer?: OptimizerSpec;
  /** Schedules to consider (default every one of `SCHEDULE_NAMES`). */
  readonly schedules?: readonly string[];
  /** Rank counts to consider (default 2). */
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

function list(name: string, v: unknown, fallback: number): number[] {
  const xs = v === undefined ? [fallback] : typeof v === "number" ? [v] : v;
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

export interface CheckedAdvise {
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

export function checkAdvise(
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
  const microBatches = list("microBatches", o.microBatches, 8);
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
    ranks: list("ranks", o.ranks, 2),
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
