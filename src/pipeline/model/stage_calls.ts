/**
 * The requests a `PipelineParallelModel` sends its ranks outside runs, as
 * a typed {@linkcode CallMap}: the model's rank group checks every call
 * against it, and the model stage executor implements it.
 *
 * @module
 */

import type { Shape } from "../../tensor/mod.ts";

/** What `info` reports per rank. */
export interface RankInfo {
  /** The rank. */
  readonly rank: number;
  /** Global stages it holds. */
  readonly stages: readonly number[];
  /** Its backend's name (`"cpu"`, `"webgpu"`). */
  readonly backend: string;
  /** Its backend's description (the WebGPU adapter it uses, or the CPU reference). */
  readonly device: string;
  /** State keys its stages hold (leaks show here). */
  readonly heldKeys: readonly string[];
  /** Live bytes on its backend. */
  readonly liveBytes: number;
  /**
   * Bytes of its stages' optimizer state (with a sharded optimizer, this
   * replica's share: about 1/D of the whole).
   */
  readonly optimizerBytes: number;
}

/** A tensor's data and shape, as it crosses to and from a rank. */
export interface TensorData {
  /** Row-major data. */
  readonly data: Float32Array;
  /** Shape. */
  readonly shape: Shape;
}

/** `predict` arguments: one stage's forward of `data`, nothing kept. */
export interface PredictArgs extends TensorData {
  /** Global stage. */
  readonly stage: number;
}

/** `decode` arguments: new positions of one prompt through one stage, with its key/value cache. */
export interface DecodeArgs extends TensorData {
  /** The generation call it belongs to. */
  readonly session: number;
  /** The prompt (micro-batch) within it. */
  readonly slot: number;
  /** Global stage. */
  readonly stage: number;
  /** Return only the last position's output (the last stage's logits). */
  readonly lastOnly: boolean;
}

/**
 * The model's requests: `load` a safetensors file (the rank takes the
 * tensors of its own stages), `save` its stages' parameters as safetensors,
 * `saveState` its stages' share of a training checkpoint (weights and
 * optimizer state, named as in the whole checkpoint, with the step count),
 * `loadState` its stages' share of a whole training checkpoint,
 * `setLearningRate` of every stage's optimizer, `predict` one stage's
 * forward, `decode` one stage's forward of new positions with the rank's
 * key/value cache of that prompt, `endDecode` dropping a generation's
 * caches, `info` about the rank.
 *
 * @example
 * ```ts
 * import type { ModelStageCalls } from "@conveyor/core/runtime";
 * const method: keyof ModelStageCalls = "save";
 * console.log(method); // "save"
 * ```
 */
export type ModelStageCalls = {
  readonly load: { readonly args: { readonly bytes: Uint8Array }; readonly result: null };
  readonly save: { readonly args: null; readonly result: Uint8Array };
  readonly saveState: { readonly args: null; readonly result: Uint8Array };
  readonly loadState: { readonly args: { readonly bytes: Uint8Array }; readonly result: null };
  readonly setLearningRate: { readonly args: { readonly lr: number }; readonly result: null };
  readonly predict: { readonly args: PredictArgs; readonly result: TensorData };
  readonly decode: { readonly args: DecodeArgs; readonly result: TensorData };
  readonly endDecode: { readonly args: { readonly session: number }; readonly result: null };
  readonly info: { readonly args: null; readonly result: RankInfo };
};
