/**
 * The layer contract: a forward pass that keeps what backward needs under a
 * caller-chosen key, and a backward split into an input-gradient pass (I)
 * and a weight-gradient pass (W), as the zero-bubble pipeline schedules need.
 *
 * Ownership rules shared by every layer:
 * - Tensors passed in (`x`, `dy`) stay owned by the caller, who may dispose
 *   them at once. A layer that must keep one takes its own handle on the
 *   storage (a same-shape `reshape` view), so nothing is copied.
 * - Tensors returned (`y`, `dx`) are owned by the caller.
 * - State lives per key: `forward` with `save` (the default) stores under
 *   `key`; `backwardInput` releases what only I needed and keeps what W
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
 * of stage 1. Numbers and strings are distinct keys (`0` is not `"0"`).
 */
export type StateKey = string | number;

/** The key used when the caller gives none. */
export const DEFAULT_KEY: StateKey = 0;

/**
 * Options of {@linkcode Layer.forward}.
 *
 * `training`, `step` and `rowOffset` describe where the forward sits in
 * training, for layers whose forward depends on it (`Dropout`). Containers
 * (`Sequential`, composite layers) pass them to every sublayer unchanged.
 * `rowOffset` counts along dimension 0 of the layer's input, which every
 * built-in layer keeps as the batch dimension.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Dropout, Sequential } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * import { type ForwardOptions } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const model = new Sequential([new Dropout(be, 0.5, { seed: 1 })]);
 * const x = ops.ones(be, [4, 3]);
 * // Training step 7, micro-batch of rows 2..3 of the full batch:
 * const opts: ForwardOptions = { key: "mb1", training: true, step: 7, rowOffset: 2 };
 * const y = model.forward(ops.sliceRows(x, 2, 4), opts);
 * const whole = model.forward(x, { save: false, training: true, step: 7 });
 * assert.deepEqual([...await y.toArray()], [...(await whole.toArray()).subarray(6)]);
 * // Without `training` (prediction, evaluation) nothing is dropped.
 * assert.deepEqual([...await model.forward(x, { save: false }).toArray()], new Array(12).fill(1));
 * ```
 */
export interface ForwardOptions {
  /** Where to keep what backward needs; {@linkcode DEFAULT_KEY} when omitted. */
  readonly key?: StateKey;
  /** Keep state for backward (default `true`); `false` keeps nothing. */
  readonly save?: boolean;
  /**
   * Training mode (default `false`): layers that behave differently while
   * training (`Dropout`) do so only when this is `true`, so prediction and
   * evaluation, which leave it unset, never drop anything. A training loop
   * passes `true` with `step` (and `rowOffset` for micro-batches).
   */
  readonly training?: boolean;
  /**
   * The training step, an integer in [0, 2^32), for randomness that must
   * change every step (`Dropout`'s mask). Required by `Dropout` when
   * `training` is true.
   */
  readonly step?: number;
  /**
   * Index in the full batch of the input's first row (along dimension 0)
   * when the input is a micro-batch (default 0), so per-row randomness
   * does not depend on how the batch was split or which rank runs it.
   */
  readonly rowOffset?: number;
}

/**
 * The training context of one forward (`training`, `step`, `rowOffset` of
 * {@linkcode ForwardOptions}, checked and with defaults), as `LayerBase`
 * hands it to `forwardImpl` and containers pass it on.
 *
 * @example
 * ```ts
 * import type { ForwardContext } from "@conveyor/core/nn";
 * const ctx: ForwardContext = { training: true, step: 3, rowOffset: 0 };
 * console.log(ctx.training); // true
 * ```
 */
export interface ForwardContext {
  /** Training mode. */
  readonly training: boolean;
  /** The training step, when given. */
  readonly step: number | undefined;
  /** Row of the full batch where this input starts. */
  readonly rowOffset: number;
}

/** Options of {@linkcode Layer.backwardInput} and {@linkcode Layer.backward}. */
export interface BackwardOptions {
  /**
   * Whether the caller needs `dx` (default `true`). With `false` (the first
   * stage of a pipeline, whose input is data) a layer that can skip the
   * input gradient does so and returns `null`; the built-in layers all
   * return `null`, skipping the work where they can (`Linear`, `Embedding`,
   * `TokenPositionEmbedding`, and the first layer of a `Sequential` or
   * `CheckpointedStage`). The weight gradients are the same either way.
   */
  readonly needInputGrad?: boolean;
}

/**
 * What {@linkcode Layer.backwardInput} and {@linkcode Layer.backward} return
 * for options of type `O`: `dx` (a `Tensor`) when `O` cannot turn
 * `needInputGrad` off (no options, `{}`, `{ needInputGrad: true }`), else
 * `Tensor | null` (`null` where the layer skipped `dx`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, type InputGrad, Linear, type Tensor } from "@conveyor/core";
 * const be = new CpuBackend();
 * const layer = new Linear(be, 2, 2, { seed: 1 });
 * const x = be.zeros([1, 2]);
 * const a = layer.forward(x, { key: "a" });
 * const dx: InputGrad<undefined> = layer.backward(a, "a"); // no options: a Tensor
 * assert.deepEqual(dx.shape, [1, 2]);
 * const b = layer.forward(x, { key: "b" });
 * const skipped: Tensor | null = layer.backward(b, "b", { needInputGrad: false });
 * assert.equal(skipped, null); // Linear skips dx when asked
 * ```
 */
export type InputGrad<O extends BackwardOptions | undefined> = O extends
  { readonly needInputGrad?: true } | undefined ? Tensor : Tensor | null;

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
 * A model layer with a forward pass and a backward split into I (input
 * gradient) and W (weight gradient).
 *
 * Ownership rules shared by every layer:
 * - Tensors passed in (`x`, `dy`) stay owned by the caller, who may dispose
 *   them at once. A layer that must keep one takes its own handle on the
 *   storage (a same-shape `reshape` view), so nothing is copied.
 * - Tensors returned (`y`, `dx`) are owned by the caller.
 * - State lives per key: `forward` with `save` (the default) stores under
 *   `key`; `backwardInput` releases what only I needed and keeps what W
 *   needs; `backwardWeight` accumulates into the parameter gradients and
 *   releases the rest. `forward` with `save: false` stores nothing (for
 *   inference and for activation-checkpoint recomputation).
 *
 * @example
 * ```ts
 * import { CpuBackend, type Layer, Linear } from "@conveyor/core";
 * const be = new CpuBackend();
 * const layer: Layer = new Linear(be, 4, 2, { seed: 1 });
 * const x = be.fromData(new Float32Array(12).fill(0.5), [3, 4]);
 * const y = layer.forward(x, { key: "mb0" }); // [3, 2]
 * const dx = layer.backwardInput(y, "mb0"); // I: [3, 4]
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
   * I: returns `dx` for the output gradient `dy` of the forward under `key`,
   * and keeps only what {@linkcode Layer.backwardWeight} needs. With
   * `needInputGrad: false` returns `null` where the layer skips `dx` (a layer
   * that cannot returns `dx`, which the caller disposes); see
   * {@linkcode InputGrad} for the return type.
   */
  backwardInput<O extends BackwardOptions | undefined = undefined>(
    dy: Tensor,
    key?: StateKey,
    opts?: O,
  ): InputGrad<O>;
  /** W: adds the parameter gradients of the pass under `key`, then frees its state. */
  backwardWeight(key?: StateKey): void;
  /** B, the full backward: I then W, with the signature of {@linkcode Layer.backwardInput}. */
  backward: Layer["backwardInput"];
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
 * import { CpuBackend, type LayerSpec, Linear } from "@conveyor/core";
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
