/**
 * Conveyor's files: safetensors (weights any safetensors tool reads) and
 * training checkpoints (a safetensors file that also holds every optimizer
 * state tensor, the step counts and the data order's state, so that a
 * stopped run resumes bit for bit). `PipelineParallelModel` reads and
 * writes both (`saveSafetensors`, `saveCheckpoint`, `loadCheckpoint`); this
 * entry point is for reading, writing and checking the files yourself.
 *
 * **Safetensors.** 8 bytes little-endian u64 `N`, then `N` bytes of UTF-8
 * JSON `{"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin,
 * end]}, "__metadata__": {...}}`, then the little-endian f32 data, whose
 * byte ranges tile the data section exactly. Every file Conveyor writes
 * carries in `__metadata__` a CRC-32 of each tensor's bytes (`data_crc32`)
 * and of the header (`header_crc32`); reading checks them after every other
 * rule and refuses a flipped bit naming its tensor. A file without them is
 * read unchecked.
 *
 * **Training checkpoints (version 1).** A safetensors file with
 * `model.<parameter name>` for each parameter, `optim.<parameter
 * name>.<slot>` for each optimizer state tensor (PyTorch's names: AdamW
 * `exp_avg`, `exp_avg_sq`; SGD with momentum `momentum_buffer`), and in
 * `__metadata__`: `format` = `"conveyor-training-checkpoint"`,
 * `format_version` = `"1"`, `step` (training steps taken, non-finite skips
 * included), `optimizer_step` (optimizer steps applied: the lr schedule's
 * position), `skipped_steps` (`step` = `optimizer_step` + `skipped_steps`),
 * `optimizer` (the optimizer spec's JSON), `lr_override` (only after
 * `setLearningRate`), `data` (only when given: e.g. an `Rng` state) and the
 * checksums. Nothing in it depends on placement: a pipeline model writes the
 * same file as the single-device model and reads it into any rank count or
 * schedule.
 *
 * **Loading a checkpoint** checks everything before anything changes: the
 * layout, format and version, every metadata field and that the step
 * counts agree, every weight and state value finite (unless
 * `allowNonFinite`), the optimizer kind, every parameter present with its
 * shape and nothing extra, every state slot once the optimizer has stepped,
 * and last the checksums. It restores state (weights, slots, step counts, a
 * hand-set lr); the optimizer's configuration stays the model's own.
 *
 * **GPT-2 checkpoints.** A folder in Hugging Face's GPT-2 layout
 * (`config.json`, `model.safetensors`, optionally `vocab.json` +
 * `merges.txt`) reads into a `createTinyGPT` model with tied embeddings
 * (`loadGPT2`) and writes back in the same layout (`saveGPT2`).
 *
 * @example Write and read back a safetensors file in memory
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeSafetensors, parseSafetensors } from "@conveyor/core/format";
 * const bytes = encodeSafetensors([{ name: "w", shape: [2], data: new Float32Array([1, 2]) }]);
 * const file = parseSafetensors(bytes);
 * assert.deepEqual(file.tensors.get("w")!.shape, [2]);
 * bytes[bytes.length - 1] ^= 1; // a flipped bit in w's data
 * assert.throws(() => parseSafetensors(bytes), /w/);
 * ```
 *
 * @module
 */

export {
  encodeSafetensors,
  loadSafetensors,
  parseSafetensors,
  saveSafetensors,
} from "./src/nn/safetensors.ts";
export type {
  LoadSafetensorsOptions,
  SafetensorsEntry,
  SafetensorsFile,
  SafetensorsTensor,
  SaveSafetensorsOptions,
} from "./src/nn/safetensors.ts";
export {
  checkCheckpointFits,
  encodeTrainingCheckpoint,
  loadTrainingCheckpoint,
  parseTrainingCheckpoint,
  saveTrainingCheckpoint,
} from "./src/nn/training_checkpoint.ts";
export type {
  CheckpointOptimizer,
  CheckpointParameter,
  LoadCheckpointOptions,
  TrainingCheckpoint,
  TrainingCheckpointContents,
  TrainingCheckpointInfo,
} from "./src/nn/training_checkpoint.ts";
export {
  createGPT2,
  fromGPT2Tensors,
  type GPT2Config,
  gpt2ConfigJson,
  gpt2ConfigOf,
  type LoadedGPT2,
  loadGPT2,
  parseGPT2Config,
  saveGPT2,
  type SaveGPT2Options,
  toGPT2Tensors,
} from "./src/nn/gpt2.ts";
// The other entry points' types that this one's API names.
export { Sequential, type SequentialOptions } from "./src/nn/sequential.ts";
export { BPETokenizer } from "./src/nn/bpe_tokenizer.ts";
export type { AdamWOptions } from "./src/nn/adamw.ts";
export type {
  BackwardOptions,
  ForwardOptions,
  InputGrad,
  Layer,
  LayerCost,
  LayerSpec,
  Parameter,
  StateKey,
} from "./src/nn/layer.ts";
export type {
  ConstantLrSpec,
  CosineLrSpec,
  LinearLrSpec,
  LrScheduleSpec,
  SequentialLrSpec,
  StepLrSpec,
  WarmupCosineLrSpec,
} from "./src/nn/lr_schedule.ts";
export type { Optimizer, ParamGroup } from "./src/nn/optimizer.ts";
export {
  type LoadStateOptions,
  OptimizerBase,
  type OptimizerDescription,
  type OptimizerSnapshot,
  type OptimizerState,
} from "./src/nn/optimizer_base.ts";
export type { AdamWSpec, OptimizerSpec, SGDSpec } from "./src/nn/optimizer_spec.ts";
export type { SGDOptions } from "./src/nn/sgd.ts";
export type { BinaryOp, UnaryGradOp, UnaryOp } from "./src/tensor/_elementwise_ops.ts";
export type {
  AdamWParams,
  Backend,
  BackendName,
  CrossEntropyResult,
  InvalidIndex,
  LayerNormResult,
  LayerNormStats,
  MemoryStats,
  RmsNormResult,
  SGDParams,
  Shape,
} from "./src/tensor/backend.ts";
export { Tensor } from "./src/tensor/tensor.ts";
