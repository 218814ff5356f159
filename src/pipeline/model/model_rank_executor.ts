/**
 * The {@linkcode RankExecutor} of a real model: each rank builds its
 * stages of a `Sequential` from their {@linkcode LayerSpec}s on its own
 * backend (CPU or WebGPU, created in the worker), runs F, B, I and W on
 * them with state per (micro-batch, stage, iteration), computes the loss on
 * the last stage, accumulates gradients and steps each stage's optimizer
 * right after that stage's last backward. `PipelineParallelModel` drives it;
 * a worker loads this module by URL and calls {@linkcode createRankExecutor}.
 *
 * Gradient accounting: the last stage calls the loss with `totalRows` = the
 * rows of the whole batch, so each micro-batch's loss and gradient are its
 * share of the full-batch mean (see the losses' micro-batch rule) and the
 * accumulated gradients equal the full batch's, for any micro-batch sizes.
 *
 * Global-norm clipping (`clipGradNorm`) is post-validation, as the
 * non-finite check (the Zero Bubble paper, section 4): each stage steps
 * unclipped after copying its parameters, optimizer state and gradients;
 * its check carries its sum of squared gradients (`RankRunOptions.policy`);
 * above `maxNorm` every stage restores its copy and steps again on the
 * gradients times `maxNorm / (norm + 1e-6)` (`redoStep`), else the copies
 * go (`commitStep`). With `shard` (ZeRO-1) a stage's optimizer holds and
 * steps this replica's share only (`_optimizer_shard.ts`).
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../../tensor/mod.ts";
import { createBackend } from "../../tensor/create_backend.ts";
import { withoutRandomInit } from "../../tensor/random.ts";
import { LeakWatch } from "../../tensor/leak_watch.ts";
import type { Layer, Parameter } from "../../nn/layer.ts";
import type { Sequential } from "../../nn/sequential.ts";
import type { OptimizerBase } from "../../nn/optimizer_base.ts";
import { loadSafetensors, saveSafetensors } from "../../nn/safetensors.ts";
import { formatAction } from "../schedule/action.ts";
import { CheckpointedStage } from "../checkpoint/checkpointed_stage.ts";
import type {
  CallHandlers,
  DeviceSpan,
  RankExecutor,
  RankExecutorInit,
  StageContext,
  StageOutput,
  StepResultOf,
} from "../runtime/rank_executor.ts";
import { isStateKeyOf, stateKey } from "../runtime/tag.ts";
import type { ModelStageCalls } from "./stage_calls.ts";
import {
  checksSteps,
  checkStageOptions,
  type ModelStageOptions,
  type ModelStagePayload,
  type ModelStageReport,
} from "./stage_options.ts";

export type {
  ModelStageOptions,
  ModelStagePayload,
  ModelStageReport,
  PipelineLoss,
} from "./stage_options.ts";
import { StepGuard } from "./_step_guard.ts";
import { loadStageState, saveStageState, type StageState } from "./_stage_state.ts";
import { evaluateMicroBatch, trainingLoss } from "./_evaluation.ts";
import { ActionSpan } from "./_action_span.ts";
import { ActivationPeak } from "./_activation_peak.ts";
import { readGradients, writeGradients } from "./_stage_gradients.ts";
import type { ShardedStages } from "./_optimizer_shard.ts";
import { buildStages } from "./_stage_build.ts";
import { describeValue } from "../../text/describe.ts";
import { StageDecoder } from "./_stage_decoder.ts";
import { TiedSync } from "./_tied_sync.ts";
import type { PendingAverage } from "../runtime/gradient_sync.ts";

/** The model's executor of one rank (exported for in-process pipelines; workers use the factory). */
export class ModelRankExecutor implements RankExecutor<ModelStageCalls> {
  /** The rank's backend. */
  readonly backend: Backend;
  readonly #init: RankExecutorInit;
  readonly #o: ModelStageOptions;
  readonly #stages: readonly number[];
  readonly #stageLayers: Map<number, Layer>;
  readonly #optimizers: Map<number, OptimizerBase>;
  readonly #lossGrad = new Map<string, Tensor>();
  readonly #outShape = new Map<string, Shape>();
  #losses: Promise<number>[] = [];
  // Training losses not read yet: read once a step or the iteration's end needs them.
  #lossTensors: Tensor[] = [];
  #correct: Promise<number>[] = [];
  #lr: number | undefined;
  #outputs: { mb: number; shape: number[]; data: Promise<Float32Array> }[] = [];
  #plan: ModelStagePayload | null = null;
  readonly #guard: StepGuard | null;
  // ZeRO-1: this replica's share of each stage's optimizer (null: whole).
  readonly #shards: ShardedStages | null;
  readonly #actPeak: ActivationPeak;
  readonly #leaks: LeakWatch;
  readonly #span: ActionSpan;
  readonly #decoder: StageDecoder;
  readonly #tied: TiedSync;

  private constructor(init: RankExecutorInit, backend: Backend) {
    this.#init = init;
    this.#o = init.options as ModelStageOptions;
    this.#stages = [...init.stages];
    this.#guard = checksSteps(this.#o) ? new StepGuard() : null;
    this.backend = backend;
    this.#span = new ActionSpan(backend);
    this.#decoder = new StageDecoder(backend, (s) => this.#stageLayer(s));
    this.#tied = new TiedSync(this.#o.tied, init.rank, init.comm, backend);
    const built = buildStages(this.#o, this.#stages, backend);
    this.#stageLayers = built.layers;
    this.#optimizers = built.optimizers;
    this.#shards = built.shards;
    this.#actPeak = new ActivationPeak(backend.memory, () => this.#stateBytes());
    // Between iterations a rank holds no activation: growth there is a leak.
    this.#leaks = new LeakWatch(backend.memory, {
      warn: (m) => console.warn(`conveyor: rank ${init.rank}: ${m}`),
    });
  }

  /**
   * Imports `options.modules`, creates the backend and builds the rank's
   * stages and optimizers (weights as initialised by the specs' factories;
   * the model then loads its own with `call("load")`).
   */
  static async create(init: RankExecutorInit): Promise<ModelRankExecutor> {
    const o = init.options as ModelStageOptions;
    checkStageOptions(o, init.stages);
    for (const m of o.modules ?? []) await import(m);
    const backend = await createBackend(
      o.backend ?? "cpu",
      {
        ...(o.tunedMatmul === undefined ? {} : { tunedMatmul: o.tunedMatmul }),
        ...(o.threads === undefined ? {} : { threads: o.threads }),
      },
    );
    try {
      return withoutRandomInit(() => new ModelRankExecutor(init, backend)); // weights load next
    } catch (e) {
      await backend.close();
      throw e;
    }
  }

  /** All parameters of the rank's stages, in stage order (names as in the whole model). */
  parameters(): Parameter[] {
    return this.#stages.flatMap((s) => this.#tied.named(s, this.#stageLayer(s).parameters()));
  }

  /** Starts summing `stage`'s tied gradients with another rank's copy (see `RankExecutor`). */
  tiedSync(stage: number, iteration: number, attempt: number): (() => PendingAverage) | null {
    return this.#tied.start(stage, iteration, attempt, () => this.#stageLayer(stage).parameters());
  }

  beginIteration(_iteration: number, payload: unknown): void {
    this.#plan = (payload ?? null) as ModelStagePayload | null;
    this.#dropLosses();
    this.#correct = [];
    this.#outputs = [];
    this.#lr = undefined;
    this.#actPeak.begin();
  }

  forward(ctx: StageContext, input: Float32Array | null): StageOutput {
    this.#span.begin();
    const plan = this.#needPlan(ctx);
    const { stage: s, microBatch: mb } = ctx.action;
    const key = this.#key(ctx);
    const rows = plan.rows[mb];
    const data = ctx.isFirstStage ? plan.inputs?.[mb] : input;
    if (data === undefined || data === null) {
      throw new TypeError(`${formatAction(ctx.action)}: no input data for micro-batch ${mb}`);
    }
    const x = this.backend.fromData(data, [rows, ...plan.inputTails[s]]);
    let y: Tensor;
    try {
      // A forward-only run (prediction) keeps nothing for a backward.
      // Training forwards carry the step and the micro-batch's first row in
      // the full batch, so per-row randomness matches single-device training.
      let rowOffset = plan.firstRow ?? 0;
      for (let j = 0; j < mb; j++) rowOffset += plan.rows[j];
      y = this.#stageLayer(s).forward(
        x,
        ctx.forwardOnly
          ? { save: false }
          : { key, training: true, step: plan.step ?? ctx.iteration, rowOffset },
      );
    } finally {
      x.dispose();
    }
    if (ctx.forwardOnly) {
      if (!ctx.isLastStage) return this.#send(y);
      // Evaluation: the loss (and accuracy), no gradient kept.
      if (plan.targets !== undefined) {
        const e = evaluateMicroBatch(this.backend, this.#o.loss, y, plan.targets[mb], [
          rows,
          ...plan.targetTail,
        ], plan.totalRows);
        this.#losses.push(e.loss);
        if (e.correct !== undefined) this.#correct.push(e.correct);
        return null;
      }
      const out = y;
      this.#outputs.push({
        mb,
        shape: [...out.shape],
        data: out.toArray().finally(() => out.dispose()),
      });
      return null;
    }
    if (!ctx.isLastStage) {
      this.#outShape.set(`${key}/${s}`, y.shape);
      return this.#send(y);
    }
    const tData = plan.targets?.[mb];
    if (tData === undefined) {
      y.dispose();
      throw new TypeError(`${formatAction(ctx.action)}: no targets for micro-batch ${mb}`);
    }
    const tail = [rows, ...plan.targetTail];
    const r = trainingLoss(this.backend, this.#o.loss, y, tData, tail, plan.totalRows);
    this.#lossGrad.set(`${key}/${s}`, r.grad);
    // Read when needed: a read-back now would wait for this forward's work.
    this.#lossTensors.push(r.loss);
    return null;
  }

  backward(ctx: StageContext, gradOutput: Float32Array | null): StageOutput {
    return this.#backward(ctx, gradOutput, true);
  }

  backwardInput(ctx: StageContext, gradOutput: Float32Array | null): StageOutput {
    return this.#backward(ctx, gradOutput, false);
  }

  backwardWeight(ctx: StageContext): void {
    this.#span.begin();
    this.#stageLayer(ctx.action.stage).backwardWeight(this.#key(ctx));
    // Nothing is read back after W: submit its work now rather than with the next action.
    this.backend.flush();
  }

  /** The device span of the last action or step (WebGPU; undefined on the CPU). */
  deviceDone(): Promise<void | DeviceSpan> | undefined {
    return this.#span.done();
  }

  /** `stage`'s accumulated gradients, per parameter (data parallelism; see `RankExecutor`). */
  gradients(stage: number): Promise<Float32Array[]> {
    return readGradients(this.#stageLayer(stage).parameters());
  }

  /** Replaces `stage`'s accumulated gradients (the replicas' average; see `RankExecutor`). */
  setGradients(stage: number, grads: readonly Float32Array[]): void {
    if (this.#shards !== null) this.#shards.setGradients(stage, grads);
    else writeGradients(this.backend, stage, this.#stageLayer(stage).parameters(), grads);
  }

  /** ZeRO-1: this replica's share of `stage`'s parameters after its step (see `RankExecutor`). */
  ownedParameters(stage: number): Promise<Float32Array> {
    return this.#sharded().owned(stage);
  }
  /** ZeRO-1: writes `stage`'s parameters gathered from every replica (see `RankExecutor`). */
  setStageParameters(stage: number, values: Float32Array): void {
    this.#sharded().setAll(stage, values);
  }

  step(stage: number, _iteration: number): StepResultOf {
    this.#span.begin();
    return this.#actPeak.change(() => this.#stepStage(stage));
  }

  // Bytes of the rank's training state (see ActivationPeak).
  #stateBytes(): number {
    const tensors = new Set<Tensor>();
    for (const p of this.parameters()) tensors.add(p.value).add(p.grad);
    let n = this.#guard?.heldBytes ?? 0;
    for (const t of tensors) n += t.bytes;
    for (const opt of this.#optimizers.values()) n += opt.stateBytes;
    return n + (this.#shards?.bytes ?? 0);
  }

  // One stage's optimizer step (with its check when steps are checked or clipped).
  #stepStage(stage: number): StepResultOf {
    const opt = this.#optimizers.get(stage)!;
    // Sharded: the share's working parameters step, and the check (its norm
    // too) is the share's (a sharded run has no tied copy on two ranks:
    // refused by create); else a tied copy counts once in the norm.
    const params = this.#stageLayer(stage).parameters();
    const share = this.#shards?.work(stage);
    const check = this.#guard?.before(
      stage,
      opt,
      share ?? params,
      stage === this.#init.numStages - 1 ? this.#readLosses() : null,
      this.#o.policy?.clipGradNorm !== undefined,
      share ?? this.#tied.forNorm(stage, params),
    );
    if (check !== undefined) this.#shards?.snapshot(stage);
    opt.step();
    this.#shards?.dropGrads(stage);
    this.#lr = opt.groups[0]?.lr;
    this.#stageLayer(stage).zeroGrad();
    return check === undefined ? undefined : { check };
  }

  /** The step of `stage` in an iteration is final (see `RankExecutor.commitStep`). */
  commitStep(stage: number): void {
    this.#actPeak.change(() => {
      this.#guard?.commit(stage);
      this.#shards?.drop(stage);
    });
  }

  /**
   * Redoes the step of `stage` with its gradients times `scale` (global-norm
   * clipping; see `RankExecutor.redoStep`): bit for bit the step that
   * clipping before it would have taken.
   */
  redoStep(stage: number, _iteration: number, scale: number): void {
    const layer = this.#stageLayer(stage);
    this.#actPeak.change(() => {
      const params = this.#shards?.work(stage) ?? layer.parameters();
      this.#guard?.redo(stage, this.#optimizers.get(stage)!, params, scale);
      this.#shards?.drop(stage);
      this.#shards?.dropGrads(stage);
      layer.zeroGrad();
    });
  }

  /** Undoes the step of `stage` exactly (see `RankExecutor.rollbackStep`). */
  rollbackStep(stage: number): void {
    this.#actPeak.change(() => {
      this.#guard?.rollback(stage, this.#optimizers.get(stage)!);
      this.#shards?.rollback(stage);
    });
  }

  /**
   * Drops what an abandoned attempt at `iteration` left: state kept for its
   * backward passes, loss gradients, accumulated gradients and losses.
   */
  abandonIteration(iteration: number): void {
    for (const s of this.#stages) {
      const layer = this.#stageLayer(s);
      for (const k of layer.heldKeys()) if (isStateKeyOf(String(k), iteration)) layer.dropState(k);
      layer.zeroGrad();
    }
    for (const [id, t] of [...this.#lossGrad]) {
      if (isStateKeyOf(id, iteration)) {
        t.dispose();
        this.#lossGrad.delete(id);
      }
    }
    for (const id of [...this.#outShape.keys()]) {
      if (isStateKeyOf(id, iteration)) this.#outShape.delete(id);
    }
    this.#dropLosses();
    this.#correct = [];
    this.#outputs = [];
  }

  // Every loss of the iteration so far, reading those not read yet.
  #readLosses(): Promise<number>[] {
    for (const t of this.#lossTensors) {
      this.#losses.push(t.toArray().then((a) => a[0]).finally(() => t.dispose()));
    }
    this.#lossTensors = [];
    return [...this.#losses];
  }

  #dropLosses(): void {
    for (const t of this.#lossTensors) t.dispose();
    this.#lossTensors = [];
    this.#losses = [];
  }

  async endIteration(iteration: number): Promise<ModelStageReport> {
    // Waits for the device once: the marks and losses after it read at once.
    if (this.backend.name !== "cpu") await this.backend.sync();
    const losses = await Promise.all(this.#readLosses());
    this.#losses = [];
    const correct = await Promise.all(this.#correct);
    this.#correct = [];
    const pending = this.#outputs.sort((a, b) => a.mb - b.mb);
    this.#outputs = [];
    const datas = await Promise.all(pending.map((o) => o.data));
    const peakActivationBytes = this.#actPeak.read();
    this.#leaks.check(iteration);
    const last = this.#stages.includes(this.#init.numStages - 1);
    let loss: number | null = null;
    if (last && pending.length === 0) {
      loss = 0;
      for (const l of losses) loss += l;
    }
    const report: ModelStageReport = {
      iteration,
      loss,
      peakActivationBytes,
      ...(this.#lr === undefined ? {} : { lr: this.#lr }),
      ...(correct.length === 0 ? {} : { correct: correct.reduce((a, b) => a + b, 0) }),
      ...(pending.length === 0
        ? {}
        : { outputs: pending.map((o, i) => ({ data: datas[i], shape: o.shape })) }),
    };
    return report;
  }

  /** The requests the model sends this rank outside runs (see {@linkcode ModelStageCalls}). */
  readonly calls: CallHandlers<ModelStageCalls> = {
    load: async ({ bytes }) => {
      // The main thread checked the file (and chose whether non-finite values may load).
      loadSafetensors(this.parameters(), bytes, { allowExtra: true, allowNonFinite: true });
      await this.#shards?.refresh();
      return null;
    },
    save: () => saveSafetensors(this.parameters()),
    saveState: () => this.#shards?.saveState() ?? saveStageState(this.#stageStates()),
    loadState: ({ bytes }) => {
      if (this.#shards !== null) this.#shards.loadState(bytes);
      else loadStageState(this.#stageStates(), bytes);
      return null;
    },
    setLearningRate: ({ lr }) => {
      // Checked once, before any optimizer changes.
      if (typeof lr !== "number" || !Number.isFinite(lr) || lr < 0) {
        throw new RangeError(`lr must be a finite number ≥ 0, got ${describeValue(lr)}`);
      }
      for (const opt of this.#optimizers.values()) opt.setLearningRate(lr);
      return null;
    },
    predict: (args) => this.#decoder.predict(args),
    decode: (args) => this.#decoder.decode(args),
    endDecode: ({ session }) => this.#decoder.end(session),
    info: () => ({
      rank: this.#init.rank,
      stages: this.#stages,
      backend: this.backend.name,
      device: this.backend.description,
      heldKeys: this.#stages.flatMap((s) => this.#stageLayer(s).heldKeys().map(String)),
      liveBytes: this.backend.memory.liveBytes,
      optimizerBytes: [...this.#optimizers.values()].reduce((n, o) => n + o.stateBytes, 0),
    }),
  };

  async dispose(): Promise<void> {
    this.#guard?.dispose();
    this.#decoder.dispose();
    this.#dropLosses();
    for (const t of this.#lossGrad.values()) t.dispose();
    this.#lossGrad.clear();
    for (const opt of this.#optimizers.values()) opt.dispose();
    this.#shards?.dispose();
    for (const c of this.#stageLayers.values()) c.dispose();
    this.#optimizers.clear();
    this.#stageLayers.clear();
    // Resolves once the device (if any) has no work left and is released.
    await this.backend.close();
  }

  #backward(ctx: StageContext, gradOutput: Float32Array | null, full: boolean): StageOutput {
    this.#span.begin();
    const s = ctx.action.stage;
    const key = this.#key(ctx);
    const id = `${key}/${s}`;
    let dy: Tensor;
    if (ctx.isLastStage) {
      const g = this.#lossGrad.get(id);
      if (g === undefined) {
        throw new Error(`${formatAction(ctx.action)}: no loss gradient (did its forward run?)`);
      }
      this.#lossGrad.delete(id);
      dy = g;
    } else {
      const shape = this.#outShape.get(id);
      if (shape === undefined || gradOutput === null) {
        throw new Error(`${formatAction(ctx.action)}: no forward output or no incoming gradient`);
      }
      this.#outShape.delete(id);
      dy = this.backend.fromData(gradOutput, shape);
    }
    const layer = this.#stageLayer(s);
    // Stage 0's input is data: it skips the input gradient.
    const opts = { needInputGrad: !ctx.isFirstStage };
    let dx: Tensor | null;
    try {
      dx = full ? layer.backward(dy, key, opts) : layer.backwardInput(dy, key, opts);
    } finally {
      dy.dispose();
    }
    if (ctx.isFirstStage) {
      dx?.dispose();
      this.backend.flush();
      return null;
    }
    if (dx === null) throw new Error(`${formatAction(ctx.action)}: the stage returned no dx`);
    // Checked here, where it is made: the rank that receives it could only blame itself.
    const plan = this.#needPlan(ctx);
    const want = [plan.rows[ctx.action.microBatch], ...plan.inputTails[s]];
    if (dx.shape.length !== want.length || dx.shape.some((d, i) => d !== want[i])) {
      const seq = layer instanceof CheckpointedStage ? layer.sequential : layer as Sequential;
      const got = `[${dx.shape.join(", ")}]`;
      dx.dispose();
      throw new RangeError(
        `layer ${seq.names[0]} (${seq.layers[0].kind}), the first of stage ${s}, returned an ` +
          `input gradient of shape ${got}, not its input's shape [${want.join(", ")}]`,
      );
    }
    return this.#send(dx);
  }

  // Data had within the call (CPU; WebGPU where maps complete when issued)
  // is posted before the next action starts; otherwise the read-back runs
  // while the runtime goes on and is sent when it resolves.
  #send(t: Tensor): StageOutput {
    this.#span.end();
    let now: Float32Array | null;
    try {
      now = t.tryToArraySync();
    } catch (e) {
      t.dispose();
      throw e;
    }
    if (now !== null) {
      t.dispose();
      return now;
    }
    return { pending: t.toArray().finally(() => t.dispose()) };
  }

  #stageStates(): StageState[] {
    return this.#stages.map((s) => ({
      stage: s,
      params: this.#tied.named(s, this.#stageLayer(s).parameters()),
      optimizer: this.#optimizers.get(s)!,
    }));
  }

  #sharded(): ShardedStages {
    if (this.#shards === null) throw new TypeError("this rank's optimizer is not sharded");
    return this.#shards;
  }

  #stageLayer(stage: number): Layer {
    const c = this.#stageLayers.get(stage);
    if (c === undefined) {
      throw new RangeError(
        `rank ${this.#init.rank} holds stages ${this.#stages.join(", ")}, not stage ${stage}`,
      );
    }
    return c;
  }

  #key(ctx: StageContext): string {
    return stateKey(ctx.iteration, ctx.action.microBatch);
  }

  #needPlan(ctx: StageContext): ModelStagePayload {
    if (this.#plan === null) {
      throw new TypeError(
        `${formatAction(ctx.action)}: iteration ${ctx.iteration} has no batch payload`,
      );
    }
    return this.#plan;
  }
}

/**
 * Builds rank `init.rank`'s model stage from `init.options`
 * ({@linkcode ModelStageOptions}): the worker-side entry point. Usually
 * driven by `PipelineParallelModel`.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, Sequential } from "@conveyor/core";
 * import { createModelRankExecutor, InProcessBackend } from "@conveyor/core/runtime";
 * const model = new Sequential([new Linear(new CpuBackend(), 2, 1)]);
 * const [comm] = InProcessBackend.createGroup(1);
 * const stage = await createModelRankExecutor({
 *   rank: 0, ranks: 1, stages: [0], numStages: 1, microBatches: 1,
 *   options: { stageSpecs: [model.spec()], loss: "mse", optimizer: { kind: "sgd", lr: 0.1 } },
 *   abortFlag: new Int32Array(1), signal: new AbortController().signal, comm,
 * });
 * const info = await stage.calls?.info(null);
 * console.log(info?.stages, info?.backend); // [ 0 ] cpu
 * await stage.dispose?.();
 * comm.close();
 * model.dispose();
 * ```
 */
export async function createModelRankExecutor(
  init: RankExecutorInit,
): Promise<RankExecutor<ModelStageCalls>> {
  return await ModelRankExecutor.create(init);
}

/** The executor-module entry point: same as {@linkcode createModelRankExecutor}. */
export const createRankExecutor: (
  init: RankExecutorInit,
) => Promise<RankExecutor<ModelStageCalls>> = createModelRankExecutor;

/** This module's URL: the executor module of a model's worker ranks. */
export const MODEL_RANK_EXECUTOR_URL: string = import.meta.url;
