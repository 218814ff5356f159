/**
 * Layers with a split backward, losses, optimizers and safetensors I/O.
 *
 * @module
 */

export { LayerBase } from "./layer_base.ts";
export type {
  BackwardOptions,
  ForwardContext,
  ForwardOptions,
  InitOptions,
  InputGrad,
  Layer,
  LayerCost,
  Parameter,
  StateKey,
} from "./layer.ts";
export { Linear, type LinearOptions } from "./linear.ts";
export { ReLU } from "./relu.ts";
export { GELU } from "./gelu.ts";
export { Tanh } from "./tanh.ts";
export { SiLU } from "./silu.ts";
export { RMSNorm, type RMSNormOptions } from "./rms_norm.ts";
export { Dropout, type DropoutOptions } from "./dropout.ts";
export { LayerNorm, type LayerNormOptions } from "./layer_norm.ts";
export { Embedding, type EmbeddingOptions } from "./embedding.ts";
export {
  TokenPositionEmbedding,
  type TokenPositionEmbeddingOptions,
} from "./token_position_embedding.ts";
export { CausalSelfAttention } from "./causal_self_attention.ts";
export { MLP, type MLPOptions } from "./mlp.ts";
export { TransformerBlock, type TransformerBlockOptions } from "./transformer_block.ts";
export { Sequential, type SequentialOptions } from "./sequential.ts";
export { Residual } from "./residual.ts";
export { crossEntropyLoss, type LossOptions, type LossResult, mseLoss } from "./losses.ts";
export type { Optimizer, ParamGroup, ParamGroupSpec } from "./optimizer.ts";
export { SGD, type SGDOptions } from "./sgd.ts";
export { AdamW, type AdamWOptions } from "./adamw.ts";
export { clipGradNorm, gradNormSquared, scaleGradsInPlace } from "./clip_grad_norm.ts";
export {
  type LoadStateOptions,
  OptimizerBase,
  type OptimizerBaseOptions,
  type OptimizerDescription,
  type OptimizerSnapshot,
  type OptimizerState,
} from "./optimizer_base.ts";
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
} from "./lr_schedule.ts";
export type { AdamWSpec, OptimizerSpec, SGDSpec } from "./optimizer_spec.ts";
export { checkOptimizerSpec, createOptimizer, optimizerStateSlots } from "./optimizer_spec.ts";
export {
  encodeSafetensors,
  loadSafetensors,
  type LoadSafetensorsOptions,
  parseSafetensors,
  type SafetensorsEntry,
  type SafetensorsFile,
  type SafetensorsTensor,
  saveSafetensors,
  type SaveSafetensorsOptions,
} from "./safetensors.ts";
export {
  checkCheckpointFits,
  CHECKPOINT_FORMAT,
  CHECKPOINT_FORMAT_VERSION,
  type CheckpointOptimizer,
  type CheckpointParameter,
  encodeTrainingCheckpoint,
  type LoadCheckpointOptions,
  loadTrainingCheckpoint,
  parseTrainingCheckpoint,
  saveTrainingCheckpoint,
  type TrainingCheckpoint,
  type TrainingCheckpointContents,
  type TrainingCheckpointInfo,
} from "./training_checkpoint.ts";
export { CharTokenizer } from "./char_tokenizer.ts";
export { sampleBatch, type TokenBatch } from "./sample_batch.ts";
export {
  type ArrayBatch,
  ArrayDataset,
  type ArrayDatasetOptions,
  type DatasetPosition,
} from "./array_dataset.ts";
export { TINY_CORPUS } from "./data/tiny_corpus.ts";
export { createTinyGPT, type TinyGPTConfig } from "./gpt.ts";
export type { LayerSpec } from "./layer.ts";
export {
  type LayerFactory,
  layerFromSpec,
  registeredLayerKinds,
  registerLayer,
} from "./layer_registry.ts";
