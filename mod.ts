/**
 * Conveyor: pipeline-parallel training on Deno's native WebGPU, with a CPU
 * reference backend.
 *
 * This entry point holds what a training script uses, in that order:
 * {@linkcode PipelineParallelModel} with its options and results, the
 * layers, optimizers and learning-rate schedules, losses, data helpers,
 * pipeline schedules with their generation, simulation and pictures, the
 * training-callback contract, and last the types those signatures name
 * (tensors, the backend contract, the layer contract). The rest sits behind
 * sub-path entry points:
 *
 * - `@conveyor/core/callbacks`: ready-made training callbacks (progress
 *   bar, metrics log, loss curves, early stopping, checkpoints).
 * - `@conveyor/core/tensor`: tensors, ops and backends (the `Backend`
 *   contract, CPU, WebGPU), `tidy`, leak checks.
 * - `@conveyor/core/nn`: a layer or optimizer of your own (`LayerBase`,
 *   `registerLayer`), the optimizer classes, losses on tensors, clipping.
 * - `@conveyor/core/data`: tokenizer, built-in text, batches, datasets.
 * - `@conveyor/core/format`: the safetensors and training-checkpoint file
 *   formats (encode, parse, load, save, check).
 * - `@conveyor/core/analysis`: schedule checks and CSV, partitions, layer
 *   profiles, memory and step-time predictions (what `advise` uses).
 * - `@conveyor/core/runtime`: transports, rank groups, executors, `runRank`.
 * - `@conveyor/core/testing`: the synthetic executor and fault injection.
 * - `@conveyor/core/cli`: the command line.
 *
 * Training runs in steps: each step cuts a batch into micro-batches and
 * runs the schedule's actions (F forward, I input gradient, W weight
 * gradient, B = I + W) on p ranks, each rank holding one or more stages
 * (pieces of the model); each stage's optimizer steps right after that
 * stage's last backward. `nonFinite` decides what a step whose loss or
 * gradients are not finite does (skip it, throw, or go on); `clipGradNorm`
 * clips by the global gradient norm over all stages; `train` runs steps in
 * windows (consecutive steps in one run of the ranks), shorter when hooks
 * must see each step.
 *
 * @example Train a small model on two ranks
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, PipelineParallelModel, ReLU, Rng, Sequential } from "@conveyor/core";
 * const cpu = new CpuBackend();
 * const rng = new Rng(1);
 * const net = new Sequential([new Linear(cpu, 2, 16, { rng }), new ReLU(cpu), new Linear(cpu, 16, 1, { rng })]);
 * const model = await PipelineParallelModel.create({
 *   model: net,
 *   schedule: "1f1b",
 *   ranks: 2,
 *   microBatches: 2,
 *   optimizer: { kind: "adamw", lr: 1e-2 },
 *   loss: "mse",
 *   backend: "cpu",
 *   rankGroup: "in-process",
 * });
 * net.dispose();
 * try {
 *   const inputs = Float32Array.from({ length: 16 }, (_, i) => (i % 5) / 5 - 0.4);
 *   const targets = Float32Array.from({ length: 8 }, (_, i) => inputs[2 * i] - inputs[2 * i + 1]);
 *   const batch = { inputs, shape: [8, 2], targets };
 *   const first = await model.step(batch);
 *   for (let i = 0; i < 30; i++) await model.step(batch);
 *   const last = await model.step(batch);
 *   assert.ok(last.loss < first.loss, `${last.loss} < ${first.loss}`);
 * } finally {
 *   await model.dispose();
 * }
 * ```
 *
 * @example Simulate a schedule
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule, simulate } from "@conveyor/core";
 * const s = generateSchedule("1f1b", { ranks: 4, microBatches: 8 });
 * assert.equal(simulate(s).bubbleFraction.toFixed(3), "0.273");
 * ```
 *
 * @module
 */

// The model: create, train, evaluate, predict, save.
export { PipelineParallelModel } from "./src/pipeline/model/pipeline_parallel_model.ts";
export type { PipelineParallelModelOptions } from "./src/pipeline/model/options.ts";
export type { PipelineLoss } from "./src/pipeline/model/model_rank_executor.ts";
export type { TrainingBatch } from "./src/pipeline/model/batch.ts";
export type { BatchSource, TrainOptions } from "./src/pipeline/model/train_loop.ts";
export type {
  EvaluateResult,
  NonFiniteReport,
  ParameterStats,
  Prediction,
  StepResult,
  TrainResult,
} from "./src/pipeline/model/results.ts";
export { NonFiniteStepError } from "./src/pipeline/model/results.ts";
export type { PipelineFailureKind } from "./src/pipeline/runtime/pipeline_rank_error.ts";
export { PipelineRankError } from "./src/pipeline/runtime/pipeline_rank_error.ts";
export type { RankGroupKind } from "./src/pipeline/runtime/rank_group.ts";
export type { RankInfo } from "./src/pipeline/model/stage_calls.ts";
export type { SaveCheckpointOptions } from "./src/pipeline/model/checkpoint_file.ts";
export type { WriteTraceOptions } from "./src/pipeline/model/pipeline_parallel_model.ts";
export type { LoadSafetensorsOptions, SaveSafetensorsOptions } from "./src/nn/safetensors.ts";
export type {
  LoadCheckpointOptions,
  TrainingCheckpointInfo,
} from "./src/nn/training_checkpoint.ts";
export type { CostSource } from "./src/pipeline/partition/layer_costs.ts";
export type {
  ActivationCheckpointOptions,
  CheckpointSegment,
  RecomputePolicy,
  StageCheckpointPlan,
} from "./src/pipeline/checkpoint/checkpoint.ts";
export { ActivationCheckpointConfig } from "./src/pipeline/checkpoint/checkpoint.ts";

// Layers (their base class and contract, for a layer of your own, are in
// `@conveyor/core/nn`).
export type { InitOptions, Layer, LayerSpec, Parameter } from "./src/nn/layer.ts";
export { Linear, type LinearOptions } from "./src/nn/linear.ts";
export { ReLU } from "./src/nn/relu.ts";
export { GELU } from "./src/nn/gelu.ts";
export { Tanh } from "./src/nn/tanh.ts";
export { SiLU } from "./src/nn/silu.ts";
export { LayerNorm, type LayerNormOptions } from "./src/nn/layer_norm.ts";
export { RMSNorm, type RMSNormOptions } from "./src/nn/rms_norm.ts";
export { Dropout, type DropoutOptions } from "./src/nn/dropout.ts";
export { Embedding, type EmbeddingOptions } from "./src/nn/embedding.ts";
export {
  TokenPositionEmbedding,
  type TokenPositionEmbeddingOptions,
} from "./src/nn/token_position_embedding.ts";
export { CausalSelfAttention } from "./src/nn/causal_self_attention.ts";
export { MLP, type MLPOptions } from "./src/nn/mlp.ts";
export { TransformerBlock, type TransformerBlockOptions } from "./src/nn/transformer_block.ts";
export { Residual } from "./src/nn/residual.ts";
export { Sequential, type SequentialOptions } from "./src/nn/sequential.ts";
export { createTinyGPT, type TinyGPTConfig } from "./src/nn/gpt.ts";
export type { GenerationOptions, GenerationResult } from "./src/nn/generate.ts";

// Optimizers and learning-rate schedules, as plain data.
export type { AdamWSpec, OptimizerSpec, SGDSpec } from "./src/nn/optimizer_spec.ts";
export type { SGDOptions } from "./src/nn/sgd.ts";
export type { AdamWOptions } from "./src/nn/adamw.ts";
export {
  type ConstantLrSpec,
  type CosineLrSpec,
  type LinearLrSpec,
  lrAt,
  type LrScheduleSpec,
  type SequentialLrSpec,
  type StepLrSpec,
  type WarmupCosineLrSpec,
} from "./src/nn/lr_schedule.ts";

// Schedules: generation, simulation, pictures.
export type { GenerateOptions, ScheduleName } from "./src/pipeline/schedule/generate.ts";
export { generateSchedule, SCHEDULE_NAMES } from "./src/pipeline/schedule/generate.ts";
export type { Schedule, TimedEvent } from "./src/pipeline/schedule/schedule.ts";
export type { Action, ActionKind, RankActions } from "./src/pipeline/schedule/action.ts";
export type { ActionCosts, CostValue } from "./src/pipeline/schedule/costs.ts";
export type { SimulateOptions, SimulationResult } from "./src/pipeline/analysis/simulate.ts";
export { simulate } from "./src/pipeline/analysis/simulate.ts";
export { renderSvg, type SvgOptions } from "./src/pipeline/render/render_svg.ts";
export { type AsciiOptions, renderAscii } from "./src/pipeline/render/render_ascii.ts";
export { type Curve, type CurvesInput, curvesSvg } from "./src/pipeline/render/curves_svg.ts";

// Training callbacks: the contract `train` calls (ready-made callbacks are
// in `@conveyor/core/callbacks`).
export type {
  StepContext,
  TrainBeginInfo,
  TrainCallback,
  TrainWeights,
  ValidationOptions,
} from "./src/pipeline/model/train_callback.ts";

// Where layers compute (tensors, ops and the backend contract are in
// `@conveyor/core/tensor`).
export type { BackendKind } from "./src/tensor/create_backend.ts";
export type { Shape } from "./src/tensor/backend.ts";
export { CpuBackend, type CpuBackendOptions } from "./src/tensor/cpu/backend.ts";
export { Rng, type RngState } from "./src/tensor/random.ts";

// Types the signatures above name: tensors and the backend contract (ops
// and the other backends are in `@conveyor/core/tensor`), the layer base
// class and contract (more in `@conveyor/core/nn`), and the run's pieces.
export { Tensor } from "./src/tensor/tensor.ts";
export type {
  AdamWParams,
  Backend,
  BackendName,
  BinaryOp,
  BufferPoolStats,
  CrossEntropyResult,
  InvalidIndex,
  LayerNormResult,
  LayerNormStats,
  MemoryStats,
  RmsNormResult,
  SGDParams,
  UnaryGradOp,
  UnaryOp,
} from "./src/tensor/backend.ts";
export { LayerBase } from "./src/nn/layer_base.ts";
export type {
  BackwardOptions,
  ForwardContext,
  ForwardOptions,
  InputGrad,
  LayerCost,
  StateKey,
} from "./src/nn/layer.ts";
export type { TimelineSummary } from "./src/pipeline/analysis/timeline_summary.ts";
export type {
  AllReduceLink,
  AllReduceSpan,
  DataParallelOptions,
} from "./src/pipeline/analysis/all_reduce.ts";
export type {
  CostedLayer,
  PartitionInput,
  PartitionResult,
  PartitionStrategy,
} from "./src/pipeline/partition/partition.ts";
export type {
  CommBackend,
  ControlHandler,
  ControlMessage,
  SendOptions,
} from "./src/pipeline/comm/backend.ts";
export type { NonFinitePolicy } from "./src/pipeline/runtime/run_policy.ts";
export { SCHEDULES } from "./src/pipeline/schedule/generate.ts";
export type {
  BubbleInputs,
  ScheduleDefinition,
  ScheduleInputs,
  ScheduleShape,
} from "./src/pipeline/schedule/schedule_registry.ts";
export type { StageCosts } from "./src/pipeline/schedule/costs.ts";
