/**
 * Building blocks for your own layer, optimizer or single-device training
 * loop: the {@linkcode Layer} contract (a forward pass that keeps what
 * backward needs under a caller-chosen key, a backward split into an
 * input-gradient pass I and a weight-gradient pass W) and its base class
 * {@linkcode LayerBase}, the layer registry that lets a spec of your layer
 * cross to pipeline ranks ({@linkcode registerLayer}), the optimizer
 * classes ({@linkcode SGD}, {@linkcode AdamW}) behind the plain-data
 * optimizer specs, the losses on tensors, gradient clipping and the checks
 * of optimizer and learning-rate specs. A training script that uses
 * `PipelineParallelModel` needs none of this: see `@conveyor/core`.
 *
 * @example One SGD step on a layer, by hand
 * ```ts
 * import assert from "node:assert/strict";
 * import { Linear } from "@conveyor/core";
 * import { CpuBackend } from "@conveyor/core/tensor";
 * import { mseLoss, SGD } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const lin = new Linear(be, 2, 1, { seed: 1 });
 * const opt = new SGD(lin.parameters(), { lr: 0.1 });
 * const x = be.fromData(new Float32Array([1, 2]), [1, 2]);
 * const y = be.fromData(new Float32Array([3]), [1, 1]);
 * const losses: number[] = [];
 * for (let i = 0; i < 5; i++) {
 *   const out = lin.forward(x);
 *   const { loss, grad } = mseLoss(out, y);
 *   losses.push((await loss.toArray())[0]);
 *   lin.backward(grad).dispose();
 *   opt.step();
 *   opt.zeroGrad();
 *   for (const t of [out, loss, grad]) t.dispose();
 * }
 * assert(losses[4] < losses[0]);
 * ```
 *
 * @module
 */

export type {
  BackwardOptions,
  ForwardContext,
  ForwardOptions,
  InitOptions,
  InputGrad,
  Layer,
  LayerCost,
  LayerSpec,
  Parameter,
  StateKey,
} from "./src/nn/layer.ts";
export { LayerBase } from "./src/nn/layer_base.ts";
export { TiedHead, type TiedHeadOptions, tieParameters } from "./src/nn/tied_head.ts";
export { cachedForward, checkCachedForward, KVCache } from "./src/nn/kv_cache.ts";
export {
  type CheckedGenerationOptions,
  checkGeneration,
  generate,
  type GenerationOptions,
  type GenerationResult,
  languageModelLimits,
  runGeneration,
  sampleToken,
  type StreamedToken,
  streamTokens,
} from "./src/nn/generate.ts";
export {
  type LayerFactory,
  layerFromSpec,
  registeredLayerKinds,
  registerLayer,
} from "./src/nn/layer_registry.ts";
export type { Optimizer, ParamGroup, ParamGroupSpec } from "./src/nn/optimizer.ts";
export {
  type LoadStateOptions,
  OptimizerBase,
  type OptimizerBaseOptions,
  type OptimizerDescription,
  type OptimizerSnapshot,
  type OptimizerState,
} from "./src/nn/optimizer_base.ts";
export { SGD, type SGDOptions } from "./src/nn/sgd.ts";
export { AdamW, type AdamWOptions } from "./src/nn/adamw.ts";
export type { AdamWSpec, OptimizerSpec, SGDSpec } from "./src/nn/optimizer_spec.ts";
export { checkOptimizerSpec, createOptimizer } from "./src/nn/optimizer_spec.ts";
export {
  checkLrSchedule,
  type ConstantLrSpec,
  type CosineLrSpec,
  type LinearLrSpec,
  LR_SCHEDULE_KINDS,
  lrAt,
  type LrScheduleSpec,
  type SequentialLrSpec,
  type StepLrSpec,
  type WarmupCosineLrSpec,
} from "./src/nn/lr_schedule.ts";
export { crossEntropyLoss, type LossOptions, type LossResult, mseLoss } from "./src/nn/losses.ts";
export { clipGradNorm, gradNormSquared, scaleGradsInPlace } from "./src/nn/clip_grad_norm.ts";
// The other entry points' types that this one's API names.
export { Tensor } from "./src/tensor/tensor.ts";
export type {
  AdamWParams,
  Backend,
  BackendName,
  BinaryOp,
  CrossEntropyResult,
  InvalidIndex,
  LayerNormResult,
  LayerNormStats,
  MemoryStats,
  RmsNormResult,
  SGDParams,
  Shape,
  UnaryGradOp,
  UnaryOp,
} from "./src/tensor/backend.ts";
export { Rng, type RngState } from "./src/tensor/random.ts";
