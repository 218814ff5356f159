/**
 * `PipelineParallelModel`: a `Sequential` cut into stages, one Deno worker
 * per rank (or every rank in this thread), trained with any schedule so that
 * the result equals training on one device. Planning lives in `plan.ts`,
 * building the ranks in `build.ts`, batches in `batch.ts`.
 *
 * @module
 */

import { traceFormat } from "../render/trace_format.ts";
import type { Shape } from "../../tensor/mod.ts";
import type { Sequential } from "../../nn/sequential.ts";
import type { LoadSafetensorsOptions, SaveSafetensorsOptions } from "../../nn/safetensors.ts";
import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import type { PartitionResult } from "../partition/partition.ts";
import { pickTrace, traceText, type WriteTraceOptions } from "./_trace_file.ts";
import { checkOutputPath } from "./output_path.ts";
import type { RankGroup, RankGroupKind } from "../runtime/rank_group.ts";
import type { PipelineLoss } from "./model_rank_executor.ts";
import type { ModelStageCalls, RankInfo } from "./stage_calls.ts";
import { checkModelOptions, type PipelineParallelModelOptions } from "./options.ts";
import type { NonFinitePolicy, RunPolicy } from "../runtime/run_policy.ts";
import { planModel } from "./plan.ts";
import { buildRanks } from "./build.ts";
import { nullBatch, payloadOf } from "./_spmd_batches.ts";
import {
  type BatchLayout,
  checkPredictInput,
  concatOutputs,
  evenRows,
  predictionPayloads,
  prod,
  type TrainingBatch,
} from "./batch.ts";
import type {
  EvaluateResult,
  ParameterStats,
  Prediction,
  StepResult,
  TrainResult,
} from "./results.ts";
import type { OptimizerSpec } from "../../nn/optimizer_spec.ts";
import type {
  LoadCheckpointOptions,
  TrainingCheckpointInfo,
} from "../../nn/training_checkpoint.ts";
import { type BatchSource, runTrainLoop, type TrainOptions } from "./train_loop.ts";
import {
  checkLoadOptions,
  checkSaveOptions,
  checkWeightsFile,
  gatherCheckpoint,
  readModelCheckpoint,
  type SaveCheckpointOptions,
} from "./checkpoint_file.ts";
import { writeFileAtomically } from "./_atomic_write.ts";
import { filePath } from "./_file_path.ts";
import { ModelLock } from "./_model_lock.ts";
import { TrainGuard } from "./_train_guard.ts";
import { callEveryRank } from "./_every_rank.ts";
import { gatherWeights, weightsFile, weightStats } from "./_weights.ts";
import {
  averageReplicaLosses,
  evaluationPayloads,
  replicaPredictionPayloads,
  replicaReports,
  shardPayloads,
} from "./_replica_batches.ts";
import { describeValue } from "../../text/describe.ts";
import type { GenerationOptions, GenerationResult } from "../../nn/generate.ts";
import { generateOnRanks, stageByStage } from "./generation.ts";

// The types of the model's methods, for those who import this module alone.
export type {
  BatchSource,
  EvaluateResult,
  GenerationOptions,
  GenerationResult,
  ParameterStats,
  PipelineParallelModelOptions,
  Prediction,
  RankInfo,
  SaveCheckpointOptions,
  StepResult,
  TrainingBatch,
  TrainOptions,
  TrainResult,
  WriteTraceOptions,
};

/**
 * A `Sequential` trained across pipeline ranks: one Deno worker per rank
 * (each with its own backend: CPU, or its own WebGPU device), or one
 * process per rank under MPI (`rankGroup: "mpi"`), stages placed
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
 * the partition into p·V stages. A rank that fails or hangs rejects the
 * step with a `PipelineRankError` naming the rank, stage and action and
 * ends every worker; the model is then closed (build a new one).
 *
 * **Lifecycle.** `await using model = await PipelineParallelModel.create(…)`
 * disposes the model at the end of the block (`Symbol.asyncDispose`), as
 * `await model.dispose()` does. Between calls the ranks' workers do not
 * keep the process alive (they are unref'd, as Node's `worker.unref()`), so
 * a script that forgets to dispose still exits once its own work is done;
 * during a call they do.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, PipelineParallelModel, ReLU, Sequential } from "@conveyor/core";
 * const be = new CpuBackend();
 * const net = new Sequential([new Linear(be, 2, 8, { seed: 1 }), new ReLU(be), new Linear(be, 8, 1, { seed: 2 })]);
 * await using model = await PipelineParallelModel.create({
 *   model: net, schedule: "1f1b", ranks: 2, microBatches: 2, loss: "mse", backend: "cpu",
 *   optimizer: { kind: "sgd", lr: 0.1, lrSchedule: { kind: "step", stepSize: 2, gamma: 0.5 } },
 * });
 * net.dispose();
 * const batch = { inputs: new Float32Array([0, 1, 1, 0, 1, 1, 0, 0]), shape: [4, 2], targets: new Float32Array([1, 1, 0, 0]) };
 * async function* batches() { // pulled as the steps need them
 *   for (let i = 0; i < 4; i++) yield batch;
 * }
 * const lrs: number[] = [];
 * const r = await model.train(batches(), { onStep: (s) => void lrs.push(s.lr) });
 * assert.deepEqual(lrs, [0.1, 0.1, 0.05, 0.05]);
 * assert.ok(r.steps[3].loss < r.steps[0].loss);
 * assert.ok((await model.evaluate(batch)).loss < r.steps[0].loss);
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
    // A checkpoint to resume from is read and checked before any rank starts.
    const resume = options.resume === undefined ? null : await readModelCheckpoint(
      options.resume,
      "resume",
      plan.params,
      o.optimizer,
      o.resumeAllowNonFinite,
    );
    const ranks = await buildRanks(o, plan, resume?.bytes);
    return new PipelineParallelModel(o, plan.schedule, plan.partition, ranks, plan.params, resume);
  }

  /** The schedule every step follows. */
  readonly schedule: Schedule;
  /** How the layers were cut: stage s holds layers `[boundaries[s], boundaries[s + 1])`. */
  readonly partition: PartitionResult;
  readonly #model: Sequential;
  readonly #optimizer: OptimizerSpec;
  readonly #nonFinite: NonFinitePolicy;
  readonly #resumedFrom: TrainingCheckpointInfo | null;
  readonly #layout: BatchLayout;
  readonly #ranks: RankGroup<ModelStageCalls>;
  readonly #replicas: number;
  readonly #params: readonly { readonly name: string; readonly shape: readonly number[] }[];
  readonly #lock: ModelLock;
  #nextStep = 0;
  readonly #guard = new TrainGuard();

  #lastEvents: readonly TimedEvent[] = [];
  #lastSteps: readonly StepResult[] = []; // of the last train() call, when it was the last run

  private constructor(
    o: {
      readonly model: Sequential;
      readonly loss: PipelineLoss;
      readonly optimizer: OptimizerSpec;
      readonly policy: RunPolicy;
    },
    schedule: Schedule,
    partition: PartitionResult,
    ranks: RankGroup<ModelStageCalls>,
    params: readonly { readonly name: string; readonly shape: readonly number[] }[],
    resume: { readonly info: TrainingCheckpointInfo } | null,
  ) {
    this.#model = o.model;
    this.#nonFinite = o.policy.nonFinite;
    this.#optimizer = o.optimizer;
    this.schedule = schedule;
    this.partition = partition;
    this.#ranks = ranks;
    this.#replicas = ranks.replicas ?? 1;
    this.#lock = new ModelLock(() => ranks.dispose());
    this.#params = params;
    this.#layout = { model: o.model, loss: o.loss, schedule, boundaries: partition.boundaries };
    this.#resumedFrom = resume?.info ?? null;
    this.#nextStep = resume?.info.step ?? 0;
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

  /** Replicas D of the pipeline (data parallelism; 1: one pipeline of p ranks). */
  get dataParallel(): number {
    return this.#replicas;
  }

  /** Micro-batches per step m. */
  get microBatches(): number {
    return this.schedule.microBatches;
  }

  /** Whether the model was disposed or brought down by a failure. */
  get closed(): boolean {
    return this.#lock.closed;
  }

  /**
   * Training steps done over the model's life (restored by a checkpoint):
   * the index of the next step, and the lr schedule's position.
   */
  get stepCount(): number {
    return this.#nextStep;
  }

  /** What the `resume` checkpoint of `create` held (step, optimizer, data), or null. */
  get resumedFrom(): TrainingCheckpointInfo | null {
    return this.#resumedFrom;
  }

  /** Events of the last training call or prediction (ms from its start); empty before the first. */
  get lastEvents(): readonly TimedEvent[] {
    if (this.#lastSteps.length === 0) return this.#lastEvents;
    return this.#lastSteps.flatMap((s) => s.events).sort((a, b) =>
      a.start - b.start || a.rank - b.rank
    );
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
   * Trains on `batches`: an array, an iterable or an `AsyncIterable`
   * (pulled as needed; an empty one runs zero steps), one step per batch, in
   * windows of consecutive steps run back to back: each rank goes on to the
   * next batch right after its own last action, and each stage steps right
   * after its own last backward, so the steps of a window interlock (a step
   * that clipping redoes makes the next one start over; see
   * `clipGradNorm`). An array runs as one window (checked whole first);
   * iterables in windows of 4 (`options.window`). A window ends wherever a
   * hook needs the model: every step for `options.onStep`, a callback's
   * `every` steps, the validation steps; there the hooks see the model and
   * the source exactly after their step (see `TrainCallback`).
   * `options.signal` stops the call after the current window. Equals
   * calling `step` on each batch in turn. See `TrainOptions`. While it runs,
   * calls that change the model (`setLearningRate`, `loadSafetensors`) are
   * refused unless made from a hook, and `loadCheckpoint` always (it would
   * move the step count under the running call).
   */
  async train(batches: BatchSource, options?: TrainOptions): Promise<TrainResult> {
    this.#lock.check();
    this.#guard.begin();
    // The call's i-th batch is training step base + i (Dropout's masks follow it).
    const base = this.#nextStep;
    try {
      return await runTrainLoop(
        {
          split: (b, where, i) =>
            b === null || b === undefined
              ? nullBatch(this.#ranks.kind, this.#ranks.localRank, where)
              : shardPayloads(this.#layout, b, where, base + i, this.#replicas),
          checkValidation: (b, where) =>
            void evaluationPayloads(this.#layout, b, where, this.#replicas),
          evaluate: (b) => this.evaluate(b),
          // Calls made while a hook runs are the caller's own, between windows.
          hook: (step, fn) => this.#guard.hook(step, fn),
          record: (steps) => {
            this.#lastSteps = steps;
            this.#lastEvents = [];
          },
          firstStep: base,
          localRank: this.#ranks.localRank ?? null,
          weights: { save: () => this.saveSafetensors(), load: (b) => this.loadSafetensors(b) },
          run: async (plans) => {
            const run = averageReplicaLosses(
              await this.#lock.exclusive(
                () => this.#ranks.run({ iterations: plans.length, ...payloadOf(plans) }),
                true,
              ),
              this.ranks,
              this.#replicas,
              this.#lastRank(),
            );
            const first = this.#nextStep;
            // A run stopped at a non-finite step ("throw") did the steps up to it.
            this.#nextStep += Math.min(plans.length, ...run.reports.map((r) => r.length));
            return { run, first };
          },
          nonFinite: this.#nonFinite,
          ranks: this.#ranks.ranks,
          lastRank: this.#lastRank(),
        },
        batches,
        options,
      );
    } finally {
      this.#guard.end();
    }
  }

  /**
   * The loss of `batch` (and, for cross-entropy, the accuracy: rows whose
   * first maximal logit is the target) with the current weights, from a
   * forward-only pipeline run: no gradient, optimizer state or step count
   * changes. The batch is checked as a training batch (at least m rows).
   */
  async evaluate(batch: TrainingBatch): Promise<EvaluateResult> {
    this.#lock.check();
    this.#guard.standsAt("evaluate", this.#nextStep);
    const plan = evaluationPayloads(this.#layout, batch, "batch", this.#replicas);
    const r = await this.#lock.exclusive(
      () => this.#ranks.run({ forwardOnly: true, payload: (rank) => plan[rank] }),
      true,
    );
    // Each replica's loss is its share of the whole batch's mean: they add up.
    const reports = replicaReports(r, this.ranks, this.#replicas, this.#lastRank());
    let loss = 0, correct = 0;
    for (const x of reports) {
      loss += x.loss as number;
      correct += x.correct ?? 0;
    }
    const rows = plan[0].totalRows;
    return {
      loss,
      rows,
      ...(reports[0].correct === undefined ? {} : { correct, accuracy: correct / rows }),
    };
  }

  /**
   * Fixes the learning rate of every stage's optimizer at `lr` for the
   * following steps, replacing the spec's `lrSchedule` (a user's own rule:
   * call it before each step, or from `train`'s `onStep`; during `train`
   * it is refused from anywhere else). A checkpoint keeps it. Throws a
   * RangeError unless `lr` is a finite number ≥ 0.
   */
  async setLearningRate(lr: number): Promise<void> {
    this.#guard.notTraining("setLearningRate", true);
    this.#guard.standsAt("setLearningRate", this.#nextStep);
    if (typeof lr !== "number" || !Number.isFinite(lr) || lr < 0) {
      throw new RangeError(
        `setLearningRate: lr must be a finite number ≥ 0, got ${describeValue(lr)}`,
      );
    }
    await this.#lock.exclusive(() => callEveryRank(this.#ranks, "setLearningRate", { lr }));
  }

  /**
   * The model's output for `inputs` (forward only, nothing kept, no
   * optimizer step). A batch of at least m rows runs as a forward-only
   * pipeline run of m micro-batches (ranks overlap); a smaller one goes
   * through the stages one after another.
   */
  async predict(input: { inputs: Float32Array; shape: Shape }): Promise<Prediction> {
    this.#lock.check();
    this.#guard.standsAt("predict", this.#nextStep);
    const { shape, shapes, outShape } = checkPredictInput(this.#layout, input);
    if (shape[0] < this.microBatches * this.#replicas) {
      const stages = this.schedule.stageToRank;
      return await this.#lock.exclusive(() =>
        stageByStage(this.#ranks, stages, input.inputs, shape)
      );
    }
    const plan = this.#replicas === 1
      ? predictionPayloads(
        this.#layout,
        shape,
        shapes,
        evenRows(shape[0], this.microBatches),
        input.inputs,
      )
      : replicaPredictionPayloads(this.#layout, shape, input.inputs, this.#replicas);
    const r = await this.#lock.exclusive(
      () => this.#ranks.run({ forwardOnly: true, payload: (rank) => plan[rank] }),
      true,
    );
    this.#lastEvents = r.events;
    this.#lastSteps = [];
    const outputs = replicaReports(r, this.ranks, this.#replicas, this.#lastRank())
      .flatMap((x) => x.outputs ?? []);
    return { data: concatOutputs(outputs, prod(outShape)), shape: outShape };
  }

  /**
   * Generates `options.maxTokens` tokens after each prompt (token ids: one
   * array, or one per micro-batch): `generate` of `@conveyor/core/nn` through
   * the stages, each on its rank with its attention layers' key/value cache
   * kept there, the prompts interleaved (see `generateOnRanks`).
   */
  async generate(
    prompts: readonly number[] | readonly (readonly number[])[],
    options: GenerationOptions,
  ): Promise<GenerationResult> {
    this.#guard.standsAt("generate", this.#nextStep);
    const stages = this.schedule.stageToRank;
    return await this.#lock.exclusive(() =>
      generateOnRanks(this.#ranks, stages, this.#model, prompts, options)
    );
  }

  /**
   * All stages' weights as one safetensors file, tensors in the model's
   * parameter order: the same bytes `saveSafetensors(model)` gives for the
   * single-device model with these weights. Under MPI every rank gathers
   * every rank's parameters and returns the same bytes (write the file from
   * one rank).
   */
  async saveSafetensors(opts?: SaveSafetensorsOptions): Promise<Uint8Array> {
    this.#guard.standsAt("saveSafetensors", this.#nextStep);
    return await weightsFile(this.#params, await this.#gather(), opts);
  }

  /**
   * Loads a whole-model safetensors file into every stage. The file is
   * checked first (layout, every parameter present with its shape, no
   * tensor the model lacks, every value finite unless
   * `options.allowNonFinite`, then the checksums), so a refused file changes
   * nothing. Under MPI every process passes the file (each loads its own
   * rank's stages). While `train` runs, only its `onStep` may call it.
   */
  async loadSafetensors(bytes: Uint8Array, options?: LoadSafetensorsOptions): Promise<void> {
    this.#guard.notTraining("loadSafetensors", true);
    checkLoadOptions(options, ["allowExtra", "allowNonFinite"], "loadSafetensors");
    this.#guard.standsAt("loadSafetensors", this.#nextStep);
    this.#lock.check();
    checkWeightsFile(bytes, this.#params, options?.allowNonFinite ?? false);
    await this.#lock.exclusive(() => callEveryRank(this.#ranks, "load", { bytes }));
  }

  /**
   * What each rank holds: its stages, its backend's name, the state keys its
   * stages still hold (empty between steps) and its backend's live bytes.
   */
  async rankInfo(): Promise<RankInfo[]> {
    return await this.#lock.exclusive(() => callEveryRank(this.#ranks, "info", null));
  }

  /** Sum and sum of squares of every parameter (f64, in the model's parameter order). */
  async parameterStats(): Promise<ParameterStats> {
    this.#guard.standsAt("parameterStats", this.#nextStep);
    return weightStats(this.#params, await this.#gather());
  }

  /**
   * Writes a timeline of the last run: an SVG picture when `path` ends in
   * `.svg`, else a Chrome trace (JSON, opens in Perfetto). After `train`
   * (or `step`) it draws the call's last step by default; `options.step`
   * picks another step of that call (its `StepResult.step`), and `"all"`
   * draws every step of the call (in an SVG, one block of rank lanes per
   * step, each from its own start on one time scale). After `predict` it
   * draws the prediction. `path` is a path or a `file:` URL
   * (percent-decoded; other schemes are a TypeError); its folder must exist
   * (checked first: a TypeError naming the path and the rule). Under MPI
   * every rank has every rank's events and only rank 0 writes.
   */
  async writeTrace(path: string | URL, options?: WriteTraceOptions): Promise<void> {
    const file = filePath(path, "writeTrace: path");
    traceFormat(file, "writeTrace: path");
    const picked = pickTrace(this.#lastSteps, this.#lastEvents, options);
    if ((this.#ranks.localRank ?? 0) !== 0) return;
    checkOutputPath(file, "writeTrace: path", { write: "direct" });
    const text = traceText(file, picked, this.schedule, this.ranks, this.microBatches);
    await Deno.writeTextFile(file, text);
  }

  /**
   * A training checkpoint of every rank gathered into one file: weights,
   * every optimizer state tensor, the step count (the lr schedule's
   * position), an lr set by `setLearningRate` and `options.data` (what the
   * data order needs). The format is `@conveyor/core`'s training checkpoint
   * (`saveTrainingCheckpoint` writes the same bytes for the single-device
   * model in the same state). With `dataParallel` D it is replica 0's state,
   * once, after checking that every replica holds the same bytes.
   */
  async checkpointBytes(options?: SaveCheckpointOptions): Promise<Uint8Array> {
    checkSaveOptions(options);
    this.#guard.standsAt("checkpointBytes", this.#nextStep);
    return await this.#lock.exclusive(() =>
      gatherCheckpoint(this.#ranks, this.#params, this.#optimizer, options, this.#nextStep)
    );
  }

  /**
   * Writes {@linkcode PipelineParallelModel.checkpointBytes} to `path`, a
   * path or a `file:` URL (percent-decoded; other schemes are a TypeError),
   * through `<name>.tmp-XXXXXXXX` beside it, flushed to the disk (fsync)
   * before it is renamed over `path`, and the folder flushed after: neither
   * a crash nor a power cut leaves a torn file. Temporary files of the same
   * target that a killed save left are removed. Needs read and write
   * permission for the folder (`Deno.rename` asks for both).
   *
   * @throws {TypeError} Before anything is written, as
   * {@linkcode checkOutputPath} words it: the folder does not exist, the
   * path is a folder, or a permission is missing (naming the
   * `--allow-read=…`/`--allow-write=…` to add).
   */
  async saveCheckpoint(path: string | URL, options?: SaveCheckpointOptions): Promise<void> {
    const file = filePath(path, "saveCheckpoint: path");
    const bytes = await this.checkpointBytes(options);
    // Under MPI every rank gathers (each answers the others' calls); rank 0
    // checks the path (after the gather: a rank that left it would hold up
    // the others) and writes.
    if ((this.#ranks.localRank ?? 0) === 0) {
      await writeFileAtomically(checkOutputPath(file, "saveCheckpoint: path"), bytes);
    }
  }

  /**
   * Loads a training checkpoint (a path, a `file:` URL or its bytes) into
   * every rank: weights, optimizer state, step counts, a hand-set lr. It may
   * come from any rank count, replica count (`dataParallel`) or schedule,
   * or the single-device model; every replica loads it.
   * Everything is checked first (format, every field and tensor, step counts
   * that agree, every value finite unless `options.allowNonFinite`, no
   * negative `exp_avg_sq`, the optimizer kind, every parameter and state
   * slot with its shape, then the checksums), so a refused file changes
   * nothing (a RangeError or TypeError beginning `checkpoint:`, naming the
   * field, or the tensor and index). The optimizer's configuration
   * (hyper-parameters, lr schedule) stays the model's own; `stepCount`
   * becomes the file's `step`, and the schedule continues from its
   * optimizer step count. Refused while `train` runs (from its `onStep`
   * too).
   */
  async loadCheckpoint(
    source: string | URL | Uint8Array,
    options?: LoadCheckpointOptions,
  ): Promise<TrainingCheckpointInfo> {
    this.#guard.notTraining("loadCheckpoint", false);
    checkLoadOptions(options, ["allowNonFinite"], "loadCheckpoint");
    this.#lock.check();
    const { bytes, info } = await readModelCheckpoint(
      source,
      "loadCheckpoint",
      this.#params,
      this.#optimizer,
      options?.allowNonFinite ?? false,
    );
    await this.#lock.exclusive(() => callEveryRank(this.#ranks, "loadState", { bytes }), true);
    this.#nextStep = info.step;
    return info;
  }

  /**
   * Ends every rank (workers, the subprocess, or the in-process executors);
   * idempotent. A worker thread that user code holds in a loop or a
   * blocking wait cannot be ended by Deno: the failure that stopped it says
   * so, naming the rank; it runs on until the process exits, which it does
   * not prevent. Ranks in a subprocess (`rankGroup: "subprocess"`) are
   * always ended at once.
   */
  async dispose(): Promise<void> {
    if (this.#lock.close()) await this.#ranks.dispose();
  }

  /** `await using model = await PipelineParallelModel.create(…)` disposes it at the block's end. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }

  #gather(): Promise<Map<string, Float32Array>> {
    return this.#lock.exclusive(() => gatherWeights(this.#ranks));
  }

  #lastRank(): number {
    return this.schedule.stageToRank[this.schedule.stageToRank.length - 1];
  }
}
