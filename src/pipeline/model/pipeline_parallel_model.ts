/**
 * `PipelineParallelModel`: a `Sequential` cut into stages, one Deno worker
 * per rank (or every rank in this thread), trained with any schedule so that
 * the result equals training on one device. Planning lives in `plan.ts`,
 * building the ranks in `build.ts`, batches in `batch.ts`.
 *
 * @module
 */

import type { Shape } from "../../tensor/mod.ts";
import { CpuBackend } from "../../tensor/cpu/backend.ts";
import type { Parameter } from "../../nn/layer.ts";
import type { Sequential } from "../../nn/sequential.ts";
import {
  parseSafetensors,
  saveSafetensors,
  type SaveSafetensorsOptions,
} from "../../nn/safetensors.ts";
import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import type { PartitionResult } from "../partition/partition.ts";
import { summarizeTimeline } from "../analysis/timeline_summary.ts";
import { toChromeTrace } from "../render/chrome_trace.ts";
import { renderSvg } from "../render/render_svg.ts";
import type { RankGroup, RankGroupKind } from "../runtime/rank_group.ts";
import type { ModelStageReport, PipelineLoss } from "./model_stage_executor.ts";
import type { ModelStageCalls, RankInfo } from "./stage_calls.ts";
import { checkModelOptions, type PipelineParallelModelOptions } from "./options.ts";
import { planModel } from "./plan.ts";
import { buildRanks } from "./build.ts";
import { localPlans } from "./_spmd_batches.ts";
import {
  type BatchLayout,
  checkFinite,
  describeArray,
  evenRows,
  predictionPayloads,
  prod,
  type TrainingBatch,
} from "./batch.ts";
import {
  type ParameterStats,
  type Prediction,
  type StepResult,
  type TrainResult,
  trainResult,
} from "./results.ts";
import { describeValue } from "../../tensor/describe.ts";

export type { PipelineParallelModelOptions } from "./options.ts";
export type { TrainingBatch } from "./batch.ts";
export type { ParameterStats, Prediction, StepResult, TrainResult } from "./results.ts";
export type { RankInfo } from "./stage_calls.ts";

/**
 * A `Sequential` trained across pipeline ranks: one Deno worker per rank
 * (each with its own backend: CPU, or its own WebGPU device), or one
 * process per rank under MPI (`rankGroup: "mpi"`), chunks placed
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
   * Checks every option, plans the model (schedule, partition, placement),
   * starts the ranks and loads their weights.
   */
  static async create(options: PipelineParallelModelOptions): Promise<PipelineParallelModel> {
    const o = checkModelOptions(options);
    const plan = await planModel(
      options,
      o.checkpoint === undefined ? undefined : o.checkpoint.maxActivationsInMemory ?? 0,
    );
    const ranks = await buildRanks(o, plan, {
      heartbeatMs: options.heartbeatMs,
      stallTimeoutMs: options.stallTimeoutMs,
    });
    return new PipelineParallelModel(
      o.model,
      o.loss,
      plan.schedule,
      plan.partition,
      ranks,
      plan.params,
    );
  }

  /** The schedule every step follows. */
  readonly schedule: Schedule;
  /** How the layers were cut: chunk s holds layers `[boundaries[s], boundaries[s + 1])`. */
  readonly partition: PartitionResult;
  readonly #model: Sequential;
  readonly #layout: BatchLayout;
  readonly #ranks: RankGroup<ModelStageCalls>;
  readonly #params: readonly { readonly name: string; readonly shape: readonly number[] }[];
  #nextStep = 0;
  #busy = false;
  #closed = false;
  #failure: Error | null = null;
  #lastEvents: readonly TimedEvent[] = [];

  private constructor(
    model: Sequential,
    loss: PipelineLoss,
    schedule: Schedule,
    partition: PartitionResult,
    ranks: RankGroup<ModelStageCalls>,
    params: readonly { readonly name: string; readonly shape: readonly number[] }[],
  ) {
    this.#model = model;
    this.schedule = schedule;
    this.partition = partition;
    this.#ranks = ranks;
    this.#params = params;
    this.#layout = { model, loss, schedule, boundaries: partition.boundaries };
  }

  /** Whether the ranks run in workers (in this process or a subprocess). */
  get workers(): boolean {
    return this.#ranks.kind === "workers" || this.#ranks.kind === "subprocess";
  }

  /** Where the ranks run: `"workers"`, `"subprocess"`, `"in-process"` or `"mpi"`. */
  get rankGroup(): RankGroupKind {
    return this.#ranks.kind;
  }

  /** Under MPI, the rank this process runs; null where this process runs every rank. */
  get localRank(): number | null {
    return this.#ranks.localRank ?? null;
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

  /**
   * One training step on `batch`: forward, backward and optimizer step on
   * every stage. Under MPI every process calls it; a process other than
   * rank 0 may pass null, and rank 0 sends it what its rank needs.
   */
  async step(batch: TrainingBatch | null): Promise<StepResult> {
    return (await this.train([batch])).steps[0];
  }

  /**
   * Several steps back to back in one run: each rank goes on to the next
   * batch right after its own last action, and each stage steps right after
   * its own last backward, so consecutive steps interlock (without
   * clipping). Equals calling `step` on each batch in turn. Under MPI
   * every process calls it with as many batches; a process other than rank
   * 0 may pass null for each, and rank 0 sends it what its rank needs.
   */
  async train(batches: readonly (TrainingBatch | null)[]): Promise<TrainResult> {
    const plans = localPlans(this.#layout, batches, {
      kind: this.#ranks.kind,
      localRank: this.#ranks.localRank,
      firstStep: this.#nextStep,
      checkUsable: () => this.#checkUsable(),
    });
    const run = await this.#exclusive(
      () =>
        this.#ranks.run({
          iterations: batches.length,
          ...(plans === null ? {} : { payload: (rank, i) => plans[i][rank] }),
        }),
      true,
    );
    const first = this.#nextStep;
    this.#nextStep += batches.length;
    this.#lastEvents = run.events;
    return trainResult(run, batches.length, first, this.ranks, this.#lastRank());
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
      throw new TypeError(
        `predict: shape must be a non-empty array, got ${describeValue(input.shape)}`,
      );
    }
    const shapes = this.#model.shapes(shape);
    const outShape = shapes[shapes.length - 1];
    if (!(input.inputs instanceof Float32Array) || input.inputs.length !== prod(shape)) {
      throw new RangeError(
        `predict: inputs must be a Float32Array of ${prod(shape)} values for shape [${
          shape.join(", ")
        }], got ${describeArray(input.inputs)}`,
      );
    }
    checkFinite(input.inputs, "predict: inputs");
    if (shape[0] < this.microBatches) {
      return await this.#exclusive(async () => {
        let cur: Prediction = { data: input.inputs, shape };
        for (let s = 0; s < this.schedule.stageToRank.length; s++) {
          cur = await this.#ranks.call(this.schedule.stageToRank[s], "predict", {
            stage: s,
            data: cur.data,
            shape: cur.shape,
          });
        }
        return cur;
      });
    }
    const rows = evenRows(shape[0], this.microBatches);
    const plan = predictionPayloads(this.#layout, shape, shapes, rows, input.inputs);
    const r = await this.#exclusive(
      () => this.#ranks.run({ forwardOnly: true, payload: (rank) => plan[rank] }),
      true,
    );
    this.#lastEvents = r.events;
    const outputs = (r.reports[this.#lastRank()][0] as ModelStageReport).outputs ?? [];
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
   * single-device model with these weights. Under MPI every rank gathers
   * every rank's parameters and returns the same bytes (write the file from
   * one rank).
   */
  async saveSafetensors(opts?: SaveSafetensorsOptions): Promise<Uint8Array> {
    const tensors = await this.#gather();
    const be = new CpuBackend();
    const params: Parameter[] = this.#params.map(({ name, shape }) => {
      const value = be.fromData(tensors.get(name)!, [...shape]);
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
   * tensor the model lacks), so a refused file changes nothing. Under MPI
   * every process passes the file (each loads its own rank's stages).
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
        Array.from({ length: this.ranks }, (_, r) => this.#ranks.call(r, "info", null)),
      )
    );
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
   * ends in `.svg`, else a Chrome trace (JSON, opens in Perfetto). Under
   * MPI every rank has every rank's events and only rank 0 writes.
   */
  async writeTrace(path: string): Promise<void> {
    if (typeof path !== "string" || path === "") {
      throw new TypeError(
        `writeTrace: path must be a non-empty string, got ${describeValue(path)}`,
      );
    }
    if (this.#lastEvents.length === 0) {
      throw new RangeError("writeTrace: no step has run yet, so there is nothing to write");
    }
    if ((this.#ranks.localRank ?? 0) !== 0) return;
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

  /**
   * Ends every rank (workers, the subprocess, or the in-process executors);
   * idempotent. Rejects, naming the rank, when a worker's thread could not
   * be ended (its code holds it in a loop or a blocking wait, which Deno
   * cannot stop): the process then will not exit by itself; ranks in a
   * subprocess (`rankGroup: "subprocess"`) are always ended.
   */
  async dispose(): Promise<void> {
    this.#closed = true;
    // Idempotent in the group; it rejects, naming the rank, when a worker
    // thread could not be ended (after a failure too).
    await this.#ranks.dispose();
  }

  async #gather(): Promise<Map<string, Float32Array>> {
    this.#checkUsable();
    const files = await this.#exclusive(() =>
      Promise.all(
        Array.from({ length: this.ranks }, (_, r) => this.#ranks.call(r, "save", null)),
      )
    );
    const out = new Map<string, Float32Array>();
    for (const bytes of files) {
      for (const [name, e] of parseSafetensors(bytes).tensors) out.set(name, e.data);
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

  #lastRank(): number {
    return this.schedule.stageToRank[this.schedule.stageToRank.length - 1];
  }
}
