/**
 * `PipelineParallelModel`: a `Sequential` cut into stages, one Deno worker
 * per rank (or every rank in this thread), trained with any schedule so that
 * the result equals training on one device.
 *
 * @module
 */

import type { Shape } from "../../tensor/mod.ts";
import { CpuBackend } from "../../tensor/cpu_backend.ts";
import type { BackendKind } from "../../tensor/create_backend.ts";
import type { LayerSpec, Parameter } from "../../nn/layer.ts";
import { Sequential } from "../../nn/sequential.ts";
import {
  parseSafetensors,
  saveSafetensors,
  type SaveSafetensorsOptions,
} from "../../nn/safetensors.ts";
import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import { generateSchedule } from "../schedule/generate.ts";
import { validateSchedule } from "../analysis/validate.ts";
import {
  LoadBalancedPartition,
  type PartitionResult,
  type PartitionStrategy,
} from "../partition/partition.ts";
import { type CostSource, layerCosts } from "../partition/layer_costs.ts";
import { ActivationCheckpointConfig, type ActivationCheckpointOptions } from "../checkpoint/checkpoint.ts";
import { checkOptimizerSpec, type OptimizerSpec } from "../../nn/optimizer_spec.ts";
import { checkInFlightCap } from "../analysis/in_flight.ts";
import { toChromeTrace } from "../render/chrome_trace.ts";
import { renderSvg } from "../render/render_svg.ts";
import { PipelineWorkerPool } from "../runtime/worker_pool.ts";
import { tuneMatmulForRanks } from "./_matmul_tuning.ts";
import { runPipelineInProcess } from "../runtime/stage_runner.ts";
import { InProcessBackend } from "../comm/in_process.ts";
import type { StageContext, StageExecutor } from "../runtime/stage_executor.ts";
import { summarizeTimeline } from "../analysis/timeline_summary.ts";
import {
  ModelStageExecutor,
  type ModelStageOptions,
  type ModelStagePayload,
  type ModelStageReport,
  type ParameterStats,
  type PipelineLoss,
} from "./model_stage_executor.ts";

const EXECUTOR_URL = new URL("./model_stage_executor.ts", import.meta.url).href;

/** Failure and hang injection, for testing the fail-fast paths. */
export interface FaultInjection {
  /** Throw when this action (text form, e.g. `"2F5"`) starts. */
  readonly failAt?: string;
  /** Block the rank's thread when this action starts (workers only): the heartbeat catches it. */
  readonly hangAt?: string;
  /**
   * Pipeline iteration (0-based, counted over the model's life; a
   * forward-only prediction run counts as one) in which they apply (default 0).
   */
  readonly iteration?: number;
}

/** Options of {@linkcode PipelineParallelModel.create}. */
export interface PipelineParallelModelOptions {
  /** The model; its weights are copied at creation (it is not changed or kept in sync). */
  readonly model: Sequential;
  /** A schedule name (built with `ranks`, `microBatches`, `stagesPerRank`) or a schedule. */
  readonly schedule: string | Schedule;
  /** Pipeline ranks p (with a schedule name; must match a given schedule). */
  readonly ranks?: number;
  /** Micro-batches per step m (with a schedule name; must match a given schedule). */
  readonly microBatches?: number;
  /** Chunks per rank V (with a schedule name; default the schedule's own). */
  readonly stagesPerRank?: number;
  /** How the layers are cut into p·V chunks (default `LoadBalancedPartition` on `partitionCosts`). */
  readonly partition?: PartitionStrategy;
  /** Cost of each layer for the partition (default `"flops"`). */
  readonly partitionCosts?: CostSource;
  /**
   * Input shape used for the FLOPs costs; default inferred from the first
   * layer (an embedding: `[1, maxLen]` or `[1, 1]`, a Linear `[1, in]`, …).
   */
  readonly inputShape?: Shape;
  /** Activation checkpointing of every chunk (default none). */
  readonly checkpoint?: ActivationCheckpointConfig | ActivationCheckpointOptions;
  /** Optimizer of every stage, stepped right after that stage's last backward. */
  readonly optimizer: OptimizerSpec;
  /** Backend of every rank (default `"auto"`: WebGPU when an adapter exists, else CPU). */
  readonly backend?: BackendKind;
  /** Loss on the last stage: `"cross-entropy"` (targets are class ids) or `"mse"`. */
  readonly loss: PipelineLoss;
  /** One Deno worker per rank (default true); false runs every rank in this thread. */
  readonly workers?: boolean;
  /**
   * Clip by the global gradient norm; makes the ranks exchange their partial
   * sums at the end of each iteration, a barrier (see the model stage
   * executor's module documentation).
   */
  readonly clipGradNorm?: number;
  /** A rank silent this long (ms) is declared hung (workers; default: the pool's, 5000). */
  readonly heartbeatMs?: number;
  /** No progress on any rank for this long (ms) fails the step (workers; default 60 000). */
  readonly stallTimeoutMs?: number;
  /** Modules every rank imports first: they register custom layers with `registerLayer`. */
  readonly modules?: readonly (string | URL)[];
  /** Failure injection (tests). */
  readonly faultInjection?: FaultInjection;
}

/** One training batch: inputs along dim 0, and the targets of the loss. */
export interface TrainingBatch {
  /** Inputs, row-major (token ids as f32 for a GPT). */
  readonly inputs: Float32Array;
  /** Input shape; dim 0 (the batch) is cut into micro-batches. */
  readonly shape: Shape;
  /**
   * Targets: class ids shaped as the prediction without its last dim
   * (cross-entropy), or shaped as the prediction (mse).
   */
  readonly targets: Float32Array;
  /** Rows of each micro-batch (default: as even as possible, the larger first); sums to dim 0. */
  readonly microBatchSizes?: readonly number[];
}

/** What one training step measured and computed. */
export interface StepResult {
  /** Index of the step over the model's life (0-based). */
  readonly step: number;
  /** Full-batch loss (sum of the micro-batch shares). */
  readonly loss: number;
  /** From the step's first action start to its last action end, ms. */
  readonly makespanMs: number;
  /** `1 − Σ busy / (p · makespan)` of the step. */
  readonly bubble: number;
  /** Time each rank spent in actions during the step, ms. */
  readonly busyMs: readonly number[];
  /** Peak activation bytes per rank (above parameters, gradients and optimizer state). */
  readonly peakActivationBytes: readonly number[];
  /** Global gradient norm before clipping (with `clipGradNorm`). */
  readonly gradNorm?: number;
  /** The step's actions, times in ms from the run's start. */
  readonly events: readonly TimedEvent[];
}

/** What {@linkcode PipelineParallelModel.train} returns. */
export interface TrainResult {
  /** One result per batch. */
  readonly steps: readonly StepResult[];
  /** From the first action start to the last action end over all steps, ms. */
  readonly makespanMs: number;
  /** Bubble over the whole run. */
  readonly bubble: number;
  /** With 2 or more steps: the bubble of the last period (steps interlock). */
  readonly steadyStateBubble?: number;
  /** Every action of every rank, times in ms from the run's start. */
  readonly events: readonly TimedEvent[];
}

/** A prediction: data and shape. */
export interface Prediction {
  /** Output data, row-major. */
  readonly data: Float32Array;
  /** Output shape. */
  readonly shape: Shape;
}

/** What {@linkcode PipelineParallelModel.rankInfo} reports per rank. */
export interface RankInfo {
  /** The rank. */
  readonly rank: number;
  /** Global stages it holds. */
  readonly stages: readonly number[];
  /** Its backend's name (`"cpu"`, `"webgpu"`). */
  readonly backend: string;
  /** State keys its chunks hold (leaks show here). */
  readonly heldKeys: readonly string[];
  /** Live bytes on its backend. */
  readonly liveBytes: number;
}

/** `n` rows in `m` parts as even as possible, the larger first. */
function evenRows(n: number, m: number): number[] {
  const base = Math.floor(n / m), extra = n % m;
  return Array.from({ length: m }, (_, i) => base + (i < extra ? 1 : 0));
}

function prod(s: readonly number[]): number {
  let n = 1;
  for (const d of s) n *= d;
  return n;
}

function inferInputShape(spec: LayerSpec): Shape | null {
  const a = spec.args as Record<string, unknown>;
  switch (spec.kind) {
    case "TokenPositionEmbedding":
      return [1, a.maxLen as number];
    case "Embedding":
      return [1, 1];
    case "Linear":
      return [1, a.inFeatures as number];
    case "LayerNorm":
    case "MLP":
      return [1, a.dim as number];
    case "TransformerBlock":
    case "CausalSelfAttention":
      return [1, 1, a.dim as number];
    case "Sequential": {
      const first = (a.layers as LayerSpec[])[0];
      return first === undefined ? null : inferInputShape(first);
    }
    default:
      return null;
  }
}

function checkpointOptions(
  c: ActivationCheckpointConfig | ActivationCheckpointOptions,
): ActivationCheckpointOptions {
  const cfg = c instanceof ActivationCheckpointConfig ? c : new ActivationCheckpointConfig(c);
  return {
    enabled: cfg.enabled,
    everyNLayers: cfg.everyNLayers,
    maxActivationsInMemory: cfg.maxActivationsInMemory,
    recompute: cfg.recompute,
    checkpointFirstLayer: cfg.checkpointFirstLayer,
    expensiveKinds: cfg.expensiveKinds,
  };
}

function buildSchedule(o: PipelineParallelModelOptions): Schedule {
  if (typeof o.schedule === "string") {
    return generateSchedule(o.schedule, {
      ranks: o.ranks as number,
      microBatches: o.microBatches as number,
      stagesPerRank: o.stagesPerRank,
    });
  }
  const s = o.schedule;
  if (s === null || typeof s !== "object") {
    throw new TypeError(`schedule must be a name or a Schedule, got ${String(s)}`);
  }
  for (
    const [what, want, got] of [
      ["ranks", o.ranks, s.ranks],
      ["microBatches", o.microBatches, s.microBatches],
      ["stagesPerRank", o.stagesPerRank, s.stagesPerRank],
    ] as const
  ) {
    if (want !== undefined && want !== got) {
      throw new RangeError(`${what} is ${want} but the given schedule has ${what} ${got}`);
    }
  }
  return s;
}

/** A rank: a worker (through the pool) or an executor in this thread. */
interface RanksRun {
  /** Iteration index of the run's first iteration (they count on across runs). */
  firstIteration: number;
  events: TimedEvent[];
  reports: readonly (readonly unknown[])[];
}

interface Ranks {
  call(rank: number, method: string, args?: unknown): Promise<unknown>;
  run(payloads: ModelStagePayload[][], forwardOnly: boolean): Promise<RanksRun>;
  dispose(): Promise<void>;
}

class WorkerRanks implements Ranks {
  constructor(readonly pool: PipelineWorkerPool) {}
  call(rank: number, method: string, args?: unknown): Promise<unknown> {
    return this.pool.call(rank, method, args);
  }
  async run(payloads: ModelStagePayload[][], forwardOnly: boolean): Promise<RanksRun> {
    const r = await this.pool.run({
      iterations: payloads.length,
      payload: (rank, i) => payloads[i][rank],
      forwardOnly,
    });
    return { firstIteration: r.firstIteration, events: [...r.events], reports: r.reports };
  }
  async dispose(): Promise<void> {
    await this.pool.dispose();
  }
}

class InProcessRanks implements Ranks {
  #next = 0;
  constructor(readonly schedule: Schedule, readonly executors: ModelStageExecutor[]) {}
  async call(rank: number, method: string, args?: unknown): Promise<unknown> {
    return await this.executors[rank].call(method, args);
  }
  // Iterations count on across runs, as in a worker pool.
  async run(payloads: ModelStagePayload[][], forwardOnly: boolean): Promise<RanksRun> {
    const first = this.#next;
    this.#next += payloads.length;
    const shift = (ctx: StageContext): StageContext => ({
      ...ctx,
      iteration: ctx.iteration + first,
    });
    const r = await runPipelineInProcess(this.schedule, {
      iterations: payloads.length,
      forwardOnly,
      createExecutor: (init): StageExecutor => {
        const ex = this.executors[init.rank];
        ex.bindRun(init.comm, init.abortFlag);
        return {
          beginIteration: (it) => ex.beginIteration(it + first, payloads[it][init.rank]),
          forward: (ctx, x) => ex.forward(shift(ctx), x),
          backward: (ctx, dy) => ex.backward(shift(ctx), dy),
          backwardInput: (ctx, dy) => ex.backwardInput(shift(ctx), dy),
          backwardWeight: (ctx) => ex.backwardWeight(shift(ctx)),
          step: (stage, it) => ex.step(stage, it + first),
          endIteration: (it) => ex.endIteration(it + first),
        };
      },
    });
    const t0 = r.events.reduce((m, e) => Math.min(m, e.start), Infinity);
    const events = r.events.map((e) => ({
      ...e,
      iteration: e.iteration + first,
      start: e.start - t0,
      end: e.end - t0,
    }));
    return { firstIteration: first, events, reports: r.reports };
  }
  async dispose(): Promise<void> {
    for (const ex of this.executors) await ex.dispose();
  }
}

/**
 * A `Sequential` trained across pipeline ranks: one Deno worker per rank
 * (each with its own backend: CPU, or its own WebGPU device), chunks placed
 * as the schedule's `stageToRank` says, each rank running its list of
 * actions from any schedule (GPipe, 1F1B, interleaved, zero-bubble, …),
 * gradients of the micro-batches adding up to the full batch's, and each
 * stage stepping its optimizer right after its own last backward. The
 * parameters after a step equal those of single-device training on the
 * whole batch (up to the f32 rounding of summing gradients in a different
 * order).
 *
 * Everything is checked before any worker starts: the optimizer, loss,
 * backend, checkpoint config, the schedule (`validateSchedule`: ranges,
 * placement, completeness, deadlocks), that every layer has a spec, and
 * the partition into p·V chunks. A rank that fails or hangs rejects the
 * step with a `PipelineWorkerError` naming the rank, stage and action and
 * ends every worker; the model is then closed (build a new one).
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, PipelineParallelModel, ReLU, Sequential } from "@conveyor/core";
 * const be = new CpuBackend();
 * const net = new Sequential([new Linear(be, 2, 8, { seed: 1 }), new ReLU(be), new Linear(be, 8, 1, { seed: 2 })]);
 * const model = await PipelineParallelModel.create({
 *   model: net, schedule: "1f1b", ranks: 2, microBatches: 2,
 *   optimizer: { kind: "sgd", lr: 0.1 }, loss: "mse", backend: "cpu", workers: false,
 * });
 * try {
 *   const batch = { inputs: new Float32Array([0, 1, 1, 0, 1, 1, 0, 0]), shape: [4, 2], targets: new Float32Array([1, 1, 0, 0]) };
 *   const first = await model.step(batch);
 *   const second = await model.step(batch);
 *   console.log(second.loss < first.loss); // true
 * } finally {
 *   await model.dispose();
 *   net.dispose();
 * }
 * ```
 */
export class PipelineParallelModel {
  /**
   * Checks every option, partitions the model, starts one worker per rank
   * (or builds the ranks in this thread) and loads each rank's weights.
   */
  static async create(options: PipelineParallelModelOptions): Promise<PipelineParallelModel> {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`options must be an object { model, schedule, ... }, got ${options}`);
    }
    const o = options;
    if (!(o.model instanceof Sequential)) {
      throw new TypeError(`model must be a Sequential, got ${String(o.model)}`);
    }
    const optimizer = checkOptimizerSpec(o.optimizer);
    if (o.loss !== "cross-entropy" && o.loss !== "mse") {
      throw new TypeError(`loss must be "cross-entropy" or "mse", got ${JSON.stringify(o.loss)}`);
    }
    const backend = o.backend ?? "auto";
    if (backend !== "auto" && backend !== "cpu" && backend !== "webgpu") {
      throw new RangeError(
        `backend must be "auto", "cpu" or "webgpu", got ${JSON.stringify(o.backend)}`,
      );
    }
    const workers = o.workers ?? true;
    if (typeof workers !== "boolean") {
      throw new TypeError(`workers must be a boolean, got ${String(o.workers)}`);
    }
    const checkpoint = o.checkpoint === undefined ? undefined : checkpointOptions(o.checkpoint);
    if (
      o.clipGradNorm !== undefined &&
      (typeof o.clipGradNorm !== "number" || !(o.clipGradNorm > 0) ||
        !Number.isFinite(o.clipGradNorm))
    ) {
      throw new RangeError(
        `clipGradNorm must be a finite positive number, got ${String(o.clipGradNorm)}`,
      );
    }
    const fault = o.faultInjection ?? {};
    if (fault.hangAt !== undefined && !workers) {
      throw new TypeError(
        "faultInjection.hangAt blocks the rank's thread: it needs workers (workers: true)",
      );
    }
    const modules = (o.modules ?? []).map((m) => String(m));
    const schedule = buildSchedule(o);
    validateSchedule(schedule);
    // The chunks refuse a forward past the cap: fail here, not in the first step.
    if (checkpoint !== undefined) {
      checkInFlightCap(schedule, checkpoint.maxActivationsInMemory ?? 0);
    }
    const numStages = schedule.stageToRank.length;
    const modelSpec = o.model.spec();
    const costSource = o.partitionCosts ?? "flops";
    let shape = o.inputShape ?? null;
    if (shape === null && costSource !== "flops") shape = [1, 1];
    if (shape === null) shape = inferInputShape(modelSpec);
    if (shape === null) {
      throw new TypeError(
        `cannot infer an input shape for the FLOPs costs from a first layer of kind ${
          o.model.layers[0].kind
        }; pass inputShape or partitionCosts "params" or "count"`,
      );
    }
    const costs = costSource === "flops"
      ? layerCosts(o.model, shape, "flops")
      : o.model.layers.map((l) => ({
        kind: l.kind,
        cost: costSource === "count" ? 1 : l.parameters().reduce((a, p) => a + p.value.size, 0),
      }));
    const strategy = o.partition ?? new LoadBalancedPartition();
    const partition = strategy.partition(costs, numStages);
    const b = partition.boundaries;
    const slices = Array.from({ length: numStages }, (_, s) => o.model.slice(b[s], b[s + 1]));
    const chunks = slices.map((sl) => sl.spec());
    // Tuned once here rather than in every worker at once (they have no cache).
    const tunedMatmul = await tuneMatmulForRanks(backend);
    const execOptions: ModelStageOptions = {
      chunks,
      backend,
      ...(tunedMatmul === undefined ? {} : { tunedMatmul }),
      loss: o.loss,
      optimizer,
      ...(checkpoint === undefined ? {} : { checkpoint }),
      ...(o.clipGradNorm === undefined ? {} : { clipGradNorm: o.clipGradNorm }),
      modules,
      ...(fault.failAt === undefined ? {} : { failAt: fault.failAt }),
      ...(fault.hangAt === undefined ? {} : { hangAt: fault.hangAt }),
      faultIteration: fault.iteration ?? 0,
    };
    // Each rank's weights: its chunks' parameters, named as in the whole model.
    const rankParams: Parameter[][] = Array.from({ length: schedule.ranks }, () => []);
    slices.forEach((sl, s) => rankParams[schedule.stageToRank[s]].push(...sl.parameters()));
    const weights = await Promise.all(rankParams.map((ps) => saveSafetensors(ps)));
    const names = o.model.parameters().map((p) => ({ name: p.name, shape: [...p.value.shape] }));

    let ranks: Ranks;
    if (workers) {
      const hb = o.heartbeatMs;
      const pool = await PipelineWorkerPool.create({
        schedule,
        executor: { module: EXECUTOR_URL, options: execOptions },
        ...(hb === undefined
          ? {}
          : { heartbeatTimeoutMs: hb, heartbeatIntervalMs: Math.max(5, Math.min(200, hb / 4)) }),
        ...(o.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: o.stallTimeoutMs }),
      });
      ranks = new WorkerRanks(pool);
    } else {
      const flag = new Int32Array(new SharedArrayBuffer(4));
      const signal = new AbortController().signal;
      const executors: ModelStageExecutor[] = [];
      // Each run binds its own transport; this group only serves construction.
      const group = InProcessBackend.createGroup(schedule.ranks);
      try {
        for (let r = 0; r < schedule.ranks; r++) {
          executors.push(
            await ModelStageExecutor.create({
              rank: r,
              ranks: schedule.ranks,
              stages: schedule.stageToRank.flatMap((x, s) => (x === r ? [s] : [])),
              numStages,
              microBatches: schedule.microBatches,
              options: structuredClone(execOptions),
              abortFlag: flag,
              signal,
              comm: group[r],
            }),
          );
        }
      } catch (e) {
        for (const ex of executors) await ex.dispose();
        throw e;
      } finally {
        for (const c of group) c.close();
      }
      ranks = new InProcessRanks(schedule, executors);
    }
    try {
      await Promise.all(weights.map((bytes, r) => ranks.call(r, "load", { bytes })));
    } catch (e) {
      await ranks.dispose();
      throw e;
    }
    return new PipelineParallelModel(o, schedule, partition, ranks, names, workers);
  }

  /** The schedule every step follows. */
  readonly schedule: Schedule;
  /** How the layers were cut: chunk s holds layers `[boundaries[s], boundaries[s + 1])`. */
  readonly partition: PartitionResult;
  /** Whether the ranks run in workers. */
  readonly workers: boolean;
  readonly #model: Sequential;
  readonly #loss: PipelineLoss;
  readonly #ranks: Ranks;
  readonly #params: readonly { name: string; shape: number[] }[];
  #nextStep = 0;
  #busy = false;
  #closed = false;
  #failure: Error | null = null;
  #lastEvents: readonly TimedEvent[] = [];

  private constructor(
    o: PipelineParallelModelOptions,
    schedule: Schedule,
    partition: PartitionResult,
    ranks: Ranks,
    params: { name: string; shape: number[] }[],
    workers: boolean,
  ) {
    this.#model = o.model;
    this.#loss = o.loss;
    this.schedule = schedule;
    this.partition = partition;
    this.#ranks = ranks;
    this.#params = params;
    this.workers = workers;
  }

  /** Pipeline ranks p. */
  get ranks(): number {
    return this.schedule.ranks;
  }

  /** Micro-batches per step m. */
  get microBatches(): number {
    return this.schedule.microBatches;
  }

  /** Whether the model was disposed or brought down by a failure. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Events of the last step or run (ms from its start); empty before the first. */
  get lastEvents(): readonly TimedEvent[] {
    return this.#lastEvents;
  }

  /** One training step on `batch`: forward, backward and optimizer step on every stage. */
  async step(batch: TrainingBatch): Promise<StepResult> {
    return (await this.train([batch])).steps[0];
  }

  /**
   * Several steps back to back in one run: each rank goes on to the next
   * batch right after its own last action, and each stage steps right after
   * its own last backward, so consecutive steps interlock (without
   * clipping). Equals calling `step` on each batch in turn.
   */
  async train(batches: readonly TrainingBatch[]): Promise<TrainResult> {
    if (!Array.isArray(batches) || batches.length === 0) {
      throw new RangeError(
        `batches must be a non-empty array of batches, got ${
          Array.isArray(batches) ? "an empty array" : String(batches)
        }`,
      );
    }
    this.#checkUsable();
    const plans = batches.map((b, i) => this.#payloads(b, batches.length > 1 ? i : -1));
    const r = await this.#exclusive(() => this.#ranks.run(plans, false), true);
    const first = this.#nextStep;
    this.#nextStep += batches.length;
    const p = this.ranks;
    const lastRank = this.schedule.stageToRank[this.schedule.stageToRank.length - 1];
    const steps: StepResult[] = plans.map((_, i) => {
      const it = r.firstIteration + i;
      const events = r.events.filter((e) => e.iteration === it);
      const sum = summarizeTimeline(events, p);
      const reports = r.reports.map((rs) => rs[i] as ModelStageReport);
      const gradNorm = reports[0].gradNorm;
      return {
        step: first + i,
        loss: reports[lastRank].loss as number,
        makespanMs: sum.makespan,
        bubble: sum.bubbleFraction,
        busyMs: sum.busy,
        peakActivationBytes: reports.map((x) => x.peakActivationBytes),
        ...(gradNorm === undefined ? {} : { gradNorm }),
        events,
      };
    });
    const all = summarizeTimeline(r.events, p);
    this.#lastEvents = r.events;
    return {
      steps,
      makespanMs: all.makespan,
      bubble: all.bubbleFraction,
      ...(all.steadyStateBubble === undefined ? {} : { steadyStateBubble: all.steadyStateBubble }),
      events: r.events,
    };
  }

  /**
   * The model's output for `inputs` (forward only, nothing kept, no
   * optimizer step). A batch of at least m rows runs as a forward-only
   * pipeline run of m micro-batches (ranks overlap); a smaller one goes
   * through the stages one after another.
   */
  async predict(input: { inputs: Float32Array; shape: Shape }): Promise<Prediction> {
    this.#checkUsable();
    if (input === null || typeof input !== "object") {
      throw new TypeError(`predict: input must be an object { inputs, shape }, got ${input}`);
    }
    const shape = Array.isArray(input.shape) ? [...input.shape] : null;
    if (shape === null || shape.length === 0) {
      throw new TypeError(`predict: shape must be a non-empty array, got ${String(input.shape)}`);
    }
    const shapes = this.#model.shapes(shape);
    const outShape = shapes[shapes.length - 1];
    if (!(input.inputs instanceof Float32Array) || input.inputs.length !== prod(shape)) {
      throw new RangeError(
        `predict: inputs must be a Float32Array of ${prod(shape)} values for shape [${
          shape.join(", ")
        }], got ${
          input.inputs instanceof Float32Array ? input.inputs.length : String(input.inputs)
        }`,
      );
    }
    if (shape[0] < this.microBatches) {
      return await this.#exclusive(async () => {
        let cur: Prediction = { data: input.inputs, shape };
        for (let s = 0; s < this.schedule.stageToRank.length; s++) {
          cur = await this.#ranks.call(this.schedule.stageToRank[s], "predict", {
            stage: s,
            data: cur.data,
            shape: cur.shape,
          }) as Prediction;
        }
        return cur;
      });
    }
    const rows = evenRows(shape[0], this.microBatches);
    const plan = this.#plan(shape, shapes, rows, input.inputs, null, []);
    const r = await this.#exclusive(() => this.#ranks.run([plan], true), true);
    this.#lastEvents = r.events;
    const lastRank = this.schedule.stageToRank[this.schedule.stageToRank.length - 1];
    const outputs = (r.reports[lastRank][0] as ModelStageReport).outputs ?? [];
    const data = new Float32Array(prod(outShape));
    let at = 0;
    for (const o of outputs) {
      data.set(o.data, at);
      at += o.data.length;
    }
    if (at !== data.length) {
      throw new Error(`predict: the last stage returned ${at} values, expected ${data.length}`);
    }
    return { data, shape: outShape };
  }

  /**
   * All stages' weights as one safetensors file, tensors in the model's
   * parameter order: the same bytes `saveSafetensors(model)` gives for the
   * single-device model with these weights.
   */
  async saveSafetensors(opts?: SaveSafetensorsOptions): Promise<Uint8Array> {
    const tensors = await this.#gather();
    const be = new CpuBackend();
    const params: Parameter[] = this.#params.map(({ name, shape }) => {
      const value = be.fromData(tensors.get(name)!, shape);
      return { name, value, grad: value };
    });
    try {
      return await saveSafetensors(params, opts);
    } finally {
      for (const p of params) p.value.dispose();
    }
  }

  /**
   * Loads a whole-model safetensors file into every stage. The file is
   * checked first (layout, every parameter present with its shape, no
   * tensor the model lacks), so a refused file changes nothing.
   */
  async loadSafetensors(bytes: Uint8Array): Promise<void> {
    this.#checkUsable();
    const file = parseSafetensors(bytes);
    const wanted = new Set<string>();
    for (const { name, shape } of this.#params) {
      wanted.add(name);
      const e = file.tensors.get(name);
      if (e === undefined) {
        throw new RangeError(`safetensors: the file has no tensor ${name} (shape [${shape}])`);
      }
      if (e.shape.length !== shape.length || e.shape.some((d, i) => d !== shape[i])) {
        throw new RangeError(
          `safetensors: tensor ${name} has shape [${e.shape}], the model needs [${shape}]`,
        );
      }
    }
    for (const name of file.tensors.keys()) {
      if (!wanted.has(name)) {
        throw new RangeError(`safetensors: the file has tensor ${name}, which the model lacks`);
      }
    }
    await this.#exclusive(() =>
      Promise.all(
        Array.from({ length: this.ranks }, (_, r) => this.#ranks.call(r, "load", { bytes })),
      )
    );
  }

  /**
   * What each rank holds: its stages, its backend's name, the state keys its
   * chunks still hold (empty between steps) and its backend's live bytes.
   */
  async rankInfo(): Promise<RankInfo[]> {
    return await this.#exclusive(() =>
      Promise.all(
        Array.from({ length: this.ranks }, (_, r) => this.#ranks.call(r, "info")),
      )
    ) as RankInfo[];
  }

  /** Sum and sum of squares of every parameter (f64, in the model's parameter order). */
  async parameterStats(): Promise<ParameterStats> {
    const tensors = await this.#gather();
    let sum = 0, sumSq = 0, count = 0;
    for (const { name } of this.#params) {
      const d = tensors.get(name)!;
      for (let i = 0; i < d.length; i++) {
        sum += d[i];
        sumSq += d[i] * d[i];
      }
      count += d.length;
    }
    return { sum, sumSq, count };
  }

  /**
   * Writes the last step's (or run's) events: an SVG timeline when `path`
   * ends in `.svg`, else a Chrome trace (JSON, opens in Perfetto).
   */
  async writeTrace(path: string): Promise<void> {
    if (typeof path !== "string" || path === "") {
      throw new TypeError(`writeTrace: path must be a non-empty string, got ${String(path)}`);
    }
    if (this.#lastEvents.length === 0) {
      throw new RangeError("writeTrace: no step has run yet, so there is nothing to write");
    }
    const events = this.#lastEvents;
    const text = path.endsWith(".svg")
      ? renderSvg(events, {
        title: `${this.schedule.name}: ${this.ranks} ranks, ${this.microBatches} micro-batches`,
        bubbleFraction: summarizeTimeline(events, this.ranks).bubbleFraction,
        timeUnit: "ms",
        ranks: this.ranks,
      })
      : JSON.stringify(
        toChromeTrace(events, {
          ranks: this.ranks,
          microsecondsPerUnit: 1000,
          processName: this.schedule.name,
        }),
      );
    await Deno.writeTextFile(path, text);
  }

  /** Ends every worker (or disposes every in-process rank); idempotent. */
  async dispose(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#ranks.dispose();
  }

  async #gather(): Promise<Map<string, Float32Array>> {
    this.#checkUsable();
    const files = await this.#exclusive(() =>
      Promise.all(
        Array.from({ length: this.ranks }, (_, r) => this.#ranks.call(r, "save")),
      )
    );
    const out = new Map<string, Float32Array>();
    for (const bytes of files) {
      for (const [name, e] of parseSafetensors(bytes as Uint8Array).tensors) out.set(name, e.data);
    }
    return out;
  }

  #checkUsable(): void {
    if (this.#failure !== null) {
      throw new Error(`the model failed and is closed: ${this.#failure.message}`, {
        cause: this.#failure,
      });
    }
    if (this.#closed) throw new Error("the PipelineParallelModel was disposed");
    if (this.#busy) {
      throw new Error("the PipelineParallelModel is busy: await the previous call first");
    }
  }

  async #exclusive<T>(body: () => Promise<T>, run = false): Promise<T> {
    this.#checkUsable();
    this.#busy = true;
    try {
      return await body();
    } catch (e) {
      // A failed run leaves the ranks in an unknown state (and the pool
      // closed): the model closes too, with nothing left running.
      if (run) {
        this.#failure = e instanceof Error ? e : new Error(String(e));
        this.#closed = true;
        await this.#ranks.dispose().catch(() => {});
      }
      throw e;
    } finally {
      this.#busy = false;
    }
  }

  // Splits a batch into micro-batches and builds each rank's payload.
  #payloads(b: TrainingBatch, index: number): ModelStagePayload[] {
    const where = index < 0 ? "batch" : `batches[${index}]`;
    if (b === null || typeof b !== "object") {
      throw new TypeError(`${where} must be an object { inputs, shape, targets }, got ${b}`);
    }
    const shape = Array.isArray(b.shape) ? [...b.shape] : null;
    if (shape === null || shape.length === 0) {
      throw new TypeError(`${where}.shape must be a non-empty array, got ${String(b.shape)}`);
    }
    const m = this.microBatches;
    const B = shape[0];
    if (!(b.inputs instanceof Float32Array) || b.inputs.length !== prod(shape)) {
      throw new RangeError(
        `${where}.inputs must be a Float32Array of ${prod(shape)} values for shape [${
          shape.join(", ")
        }], got ${b.inputs instanceof Float32Array ? b.inputs.length : String(b.inputs)}`,
      );
    }
    if (B < m) {
      throw new RangeError(
        `${where} has ${B} rows (dim 0), fewer than the ${m} micro-batches: each micro-batch ` +
          "needs at least one row",
      );
    }
    const shapes = this.#model.shapes(shape);
    const out = shapes[shapes.length - 1];
    const targetShape = this.#loss === "mse" ? out : out.slice(0, -1);
    if (!(b.targets instanceof Float32Array) || b.targets.length !== prod(targetShape)) {
      throw new RangeError(
        `${where}.targets must be a Float32Array of ${prod(targetShape)} values (shape [${
          targetShape.join(", ")
        }] for ${this.#loss}), got ${
          b.targets instanceof Float32Array ? b.targets.length : String(b.targets)
        }`,
      );
    }
    if (this.#loss === "cross-entropy") {
      const V = out[out.length - 1];
      const t = b.targets;
      for (let i = 0; i < t.length; i++) {
        if (!Number.isInteger(t[i]) || t[i] < 0 || t[i] >= V) {
          throw new RangeError(
            `${where}.targets[${i}] must be a class id in [0, ${V}), got ${t[i]}`,
          );
        }
      }
    }
    let rows: number[];
    if (b.microBatchSizes !== undefined) {
      rows = [...b.microBatchSizes];
      if (
        rows.length !== m || rows.some((r) => !Number.isInteger(r) || r < 1) ||
        rows.reduce((a, c) => a + c, 0) !== B
      ) {
        throw new RangeError(
          `${where}.microBatchSizes must be ${m} positive integers summing to the ${B} rows, got [${
            rows.join(", ")
          }]`,
        );
      }
    } else {
      rows = evenRows(B, m);
    }
    return this.#plan(shape, shapes, rows, b.inputs, b.targets, targetShape);
  }

  // Each rank's payload: the row counts and shapes for all, the inputs for
  // the rank of stage 0 and the targets for the rank of the last stage.
  #plan(
    shape: Shape,
    shapes: Shape[],
    rows: number[],
    inputs: Float32Array,
    targets: Float32Array | null,
    targetShape: Shape,
  ): ModelStagePayload[] {
    const out = shapes[shapes.length - 1];
    const b0 = this.partition.boundaries;
    const numStages = this.schedule.stageToRank.length;
    const inputTails = Array.from(
      { length: numStages },
      (_, s) => (b0[s] === 0 ? shape : shapes[b0[s] - 1]).slice(1),
    );
    const inRow = prod(shape.slice(1)), tRow = prod(targetShape.slice(1));
    const inputParts: Float32Array[] = [], targetParts: Float32Array[] = [];
    let at = 0;
    for (const r of rows) {
      inputParts.push(inputs.slice(at * inRow, (at + r) * inRow));
      if (targets !== null) targetParts.push(targets.slice(at * tRow, (at + r) * tRow));
      at += r;
    }
    const common = {
      rows,
      totalRows: prod(out.slice(0, -1)),
      inputTails,
      targetTail: targetShape.slice(1),
    };
    const firstRank = this.schedule.stageToRank[0];
    const lastRank = this.schedule.stageToRank[numStages - 1];
    return Array.from({ length: this.ranks }, (_, r) => ({
      ...common,
      ...(r === firstRank ? { inputs: inputParts } : {}),
      ...(r === lastRank && targets !== null ? { targets: targetParts } : {}),
    }));
  }
}
