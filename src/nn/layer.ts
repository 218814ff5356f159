/**
 * The layer contract: a forward pass that keeps what backward needs under a
 * caller-chosen key, and a backward split into an input-gradient pass (B)
 * and a weight-gradient pass (W), as the zero-bubble pipeline schedules need.
 *
 * Ownership rules shared by every layer:
 * - Tensors passed in (`x`, `dy`) stay owned by the caller, who may dispose
 *   them at once. A layer that must keep one takes its own handle on the
 *   storage (a same-shape `reshape` view), so nothing is copied.
 * - Tensors returned (`y`, `dx`) are owned by the caller.
 * - State lives per key: `forward` with `save` (the default) stores under
 *   `key`; `backwardInput` releases what only B needed and keeps what W
 *   needs; `backwardWeight` accumulates into the parameter gradients and
 *   releases the rest. `forward` with `save: false` stores nothing (for
 *   inference and for activation-checkpoint recomputation).
 *
 * @module
 */

import type { Shape, Tensor } from "../tensor/mod.ts";
import type { Rng } from "../tensor/random.ts";

/**
 * Identifies one forward pass in flight, e.g. `"mb3/c1"` for micro-batch 3
 * of chunk 1. Numbers and strings are distinct keys (`0` is not `"0"`).
 */
export type StateKey = string | number;

/** The key used when the caller gives none. */
export const DEFAULT_KEY: StateKey = 0;

/** Options of {@linkcode Layer.forward}. */
export interface ForwardOptions {
  /** Where to keep what backward needs; {@linkcode DEFAULT_KEY} when omitted. */
  readonly key?: StateKey;
  /** Keep state for backward (default `true`); `false` keeps nothing. */
  readonly save?: boolean;
}

/** Options of {@linkcode Layer.backwardInput} and {@linkcode Layer.backward}. */
export interface BackwardOptions {
  /**
   * Whether the caller needs `dx` (default `true`). With `false` (the first
   * stage of a pipeline, whose input is data) a layer that can skip the
   * input gradient does so and returns `null`; the built-in layers all
   * return `null`, skipping the work where they can (`Linear`, `Embedding`,
   * `TokenPositionEmbedding`, and the first layer of a `Sequential` or
   * `CheckpointedChunk`). The weight gradients are the same either way.
   */
  readonly needInputGrad?: boolean;
}

/**
 * A trainable tensor and its gradient accumulator (same shape). `name` is a
 * stable dotted path (e.g. `"3.attn.qkv.weight"`) used by safetensors I/O.
 */
export interface Parameter {
  /** Dotted name, unique within a model. */
  readonly name: string;
  /** The weights; optimizers update this tensor in place. */
  readonly value: Tensor;
  /** Accumulated gradient; `backwardWeight` adds to it, `zeroGrad` clears it. */
  readonly grad: Tensor;
}

/** Cost estimate of one layer for one input shape (used for partitioning). */
export interface LayerCost {
  /** Number of trainable scalars. */
  readonly params: number;
  /** Estimated floating-point operations of one forward pass. */
  readonly flops: number;
}

/**
 * A model layer with a forward pass and a backward split into B (input
 * gradient) and W (weight gradient). See the module documentation for the
 * ownership rules.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, type Layer } from "@conveyor/core";
 * const be = new CpuBackend();
 * const layer: Layer = new Linear(be, 4, 2, { seed: 1 });
 * const x = be.fromData(new Float32Array(12).fill(0.5), [3, 4]);
 * const y = layer.forward(x, { key: "mb0" }); // [3, 2]
 * const dx = layer.backwardInput(y, "mb0"); // B: [3, 4]
 * layer.backwardWeight("mb0"); // W: accumulates into parameters()[i].grad
 * console.log(y.shape, dx.shape, layer.parameters().map((p) => p.name));
 * for (const t of [x, y, dx]) t.dispose();
 * layer.dispose();
 * ```
 */
export interface Layer {
  /** The type name, e.g. `"Linear"` (partitioning selects layers by it). */
  readonly kind: string;
  /**
   * Forward pass. With `save` (the default) keeps what backward needs under
   * `key`; throws if that key already holds state.
   */
  forward(x: Tensor, opts?: ForwardOptions): Tensor;
  /**
   * B: returns `dx` for the output gradient `dy` of the forward under `key`,
   * and keeps only what {@linkcode Layer.backwardWeight} needs.
   */
  backwardInput(dy: Tensor, key?: StateKey): Tensor;
  /**
   * B as above; with `needInputGrad: false` returns `null` where the layer
   * skips `dx` (a layer that cannot returns `dx`, which the caller disposes).
   */
  backwardInput(dy: Tensor, key: StateKey | undefined, opts: BackwardOptions): Tensor | null;
  /** W: adds the parameter gradients of the pass under `key`, then frees its state. */
  backwardWeight(key?: StateKey): void;
  /** B then W; returns `dx`. */
  backward(dy: Tensor, key?: StateKey): Tensor;
  /** B then W, with the options of {@linkcode Layer.backwardInput}. */
  backward(dy: Tensor, key: StateKey | undefined, opts: BackwardOptions): Tensor | null;
  /** Frees whatever is kept under `key` (no-op when nothing is). */
  dropState(key?: StateKey): void;
  /** Keys that currently hold state (for leak checks and the pipeline runtime). */
  heldKeys(): StateKey[];
  /** Trainable parameters with their gradients, in a stable order. */
  parameters(): Parameter[];
  /** Sets every parameter gradient to zero. */
  zeroGrad(): void;
  /** Output shape for an input shape; throws a RangeError naming the values if incompatible. */
  outputShape(inputShape: Shape): Shape;
  /** Parameter count and forward FLOPs estimate for an input shape. */
  cost(inputShape: Shape): LayerCost;
  /** Releases parameters, gradients and every kept state. */
  dispose(): void;
  /**
   * The architecture as JSON-able data, rebuilt by `layerFromSpec` (see
   * {@linkcode LayerSpec}). Optional: only layers sent to pipeline workers
   * need it.
   */
  spec?(): LayerSpec;
}

/**
 * A layer's architecture as JSON-able data (not its weights): the `kind`
 * under which a factory is registered and the arguments that factory needs
 * to rebuild the same layer, nested for composites (a `Sequential`'s args
 * hold its layers' specs). The pipeline sends specs to its workers, which
 * rebuild the layers with `layerFromSpec`; the weights travel separately
 * as safetensors bytes.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, type LayerSpec } from "@conveyor/core";
 * const lin = new Linear(new CpuBackend(), 4, 2);
 * const spec: LayerSpec = lin.spec();
 * console.log(JSON.stringify(spec)); // {"kind":"Linear","args":{"inFeatures":4,"outFeatures":2,"bias":true}}
 * lin.dispose();
 * ```
 */
export interface LayerSpec {
  /** Registered kind, e.g. `"Linear"`. */
  readonly kind: string;
  /** Constructor arguments, JSON-able (numbers, strings, booleans, arrays, objects, specs). */
  readonly args: Readonly<Record<string, unknown>>;
}

/** Options shared by layers with randomly initialised parameters. */
export interface InitOptions {
  /** Seed of a fresh generator (default 0); ignored when `rng` is given. */
  readonly seed?: number;
  /**
   * Generator to draw from; passing one shared generator through a model's
   * constructors makes the whole model reproducible from one seed.
   */
  readonly rng?: Rng;
}
