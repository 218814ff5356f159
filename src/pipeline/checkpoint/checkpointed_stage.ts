/**
 * A pipeline stage (a slice of a `Sequential`) run under an activation
 * checkpoint config: forward keeps only the checkpointed tensors of each
 * micro-batch, backward recomputes a segment from them just before its B
 * pass.
 *
 * @module
 */

import { formatShape as fmtShape } from "../../text/describe.ts";
import {
  type BackwardOptions,
  DEFAULT_KEY,
  type ForwardOptions,
  type Layer,
  type LayerCost,
} from "../../nn/layer.ts";
import type { Parameter, StateKey } from "../../nn/layer.ts";
import { Sequential } from "../../nn/sequential.ts";
import type { Shape, Tensor } from "../../tensor/mod.ts";
import {
  ActivationCheckpointConfig,
  type ActivationCheckpointOptions,
  type CheckpointSegment,
  type StageCheckpointPlan,
} from "./checkpoint.ts";
import { describeValue } from "../../text/describe.ts";

/** What one micro-batch leaves in the stage between its passes. */
interface StageState {
  phase: "forward" | "input";
  readonly outShape: Shape;
  /** The forward's training context, reused by the recompute (Dropout's mask). */
  readonly context: { training?: boolean; step?: number; rowOffset?: number };
  /** Segment start → that segment's stored input. */
  readonly inputs: Map<number, Tensor>;
  /** Layer index → its stored output (a recompute starting point). */
  readonly outputs: Map<number, Tensor>;
}

/** `opts.needInputGrad` (default true); a TypeError for anything but a boolean. */
function needInputGrad(opts: BackwardOptions | undefined): boolean {
  const v = opts?.needInputGrad;
  if (v === undefined) return true;
  if (typeof v !== "boolean") {
    throw new TypeError(
      `CheckpointedStage: needInputGrad must be a boolean, got ${describeValue(v)}`,
    );
  }
  return v;
}

function fmtKey(key: StateKey): string {
  return typeof key === "string" ? JSON.stringify(key) : String(key);
}

/** A handle of our own on `t`'s storage (no copy), so the caller may dispose theirs. */
function retain(t: Tensor): Tensor {
  return t.reshape(t.shape);
}

/**
 * A stage of layers run under an {@linkcode ActivationCheckpointConfig}. It
 * implements the layer contract, with state per key (one key per
 * micro-batch of this stage, e.g. `"mb3"`):
 *
 * - `forward` runs every layer; layers the plan keeps save their state, the
 *   others run with `save: false`; the input of each recomputed segment (and
 *   the output of a kept layer that feeds a recomputed one) is stored under
 *   the key.
 * - `backwardInput` (B) walks the layers from the last; on reaching a
 *   segment's last layer it first recomputes that segment's forward from the
 *   stored tensors of the SAME key (saving state this time), then runs B
 *   through it. Stored tensors are released as they are used. What W needs
 *   stays in the layers until `backwardWeight`, so between B and W the stage
 *   holds about one full activation set for that key (the price of the B/W
 *   split).
 * - `backwardWeight` (W) runs every layer's W for the key.
 * - `backward` (B+W fused) runs each layer's W right after its B, so the
 *   recomputed state of one segment at a time is alive: peak memory about
 *   (segments)·A_in + (segment length)·A_layer.
 *
 * Gradients are bitwise those of the plain `Sequential`: recomputation
 * repeats the same deterministic kernels on the same inputs.
 *
 * @example
 * ```ts
 * import { ActivationCheckpointConfig, CpuBackend, GELU, Linear, Sequential } from "@conveyor/core";
 * import { CheckpointedStage } from "@conveyor/core/analysis";
 * const be = new CpuBackend();
 * const model = new Sequential([new Linear(be, 4, 4), new GELU(be), new Linear(be, 4, 2)]);
 * const stage = new CheckpointedStage(model, { enabled: true, everyNLayers: 2 });
 * const x = be.zeros([3, 4]);
 * const y = stage.forward(x, { key: "mb0" });
 * const dx = stage.backward(y, "mb0"); // recomputes, then B and W
 * console.log(stage.plan.segments, dx.shape, stage.heldKeys()); // … [3, 4] []
 * for (const t of [x, y, dx]) t.dispose();
 * stage.dispose();
 * ```
 */
export class CheckpointedStage implements Layer {
  /** Always `"CheckpointedStage"`. */
  readonly kind: string = "CheckpointedStage";
  /** The layers, as a `Sequential` (names and parameter names as in the model). */
  readonly sequential: Sequential;
  /** The checkpoint configuration. */
  readonly config: ActivationCheckpointConfig;
  /** How this stage's layers are checkpointed. */
  readonly plan: StageCheckpointPlan;
  readonly #layers: readonly Layer[];
  readonly #segmentByLast: Map<number, CheckpointSegment>;
  readonly #segmentStarts: Set<number>;
  readonly #states = new Map<StateKey, StageState>();

  /**
   * Wraps `layers` (a `Sequential`, e.g. a `slice` of the model, or an
   * array of layers) under `config` (a config or its options; default: no
   * checkpointing). Like a `Sequential`, the stage owns its layers.
   */
  constructor(
    layers: Sequential | readonly Layer[],
    config: ActivationCheckpointConfig | ActivationCheckpointOptions = {},
  ) {
    this.sequential = layers instanceof Sequential ? layers : new Sequential(layers);
    this.config = config instanceof ActivationCheckpointConfig
      ? config
      : new ActivationCheckpointConfig(config);
    this.#layers = this.sequential.layers;
    this.plan = this.config.plan(this.#layers.map((l) => l.kind));
    this.#segmentByLast = new Map(this.plan.segments.map((s) => [s.end - 1, s]));
    this.#segmentStarts = new Set(this.plan.segments.map((s) => s.start));
  }

  /** The layers, in order. */
  get layers(): readonly Layer[] {
    return this.#layers;
  }

  outputShape(inputShape: Shape): Shape {
    return this.sequential.outputShape(inputShape);
  }

  cost(inputShape: Shape): LayerCost {
    return this.sequential.cost(inputShape);
  }

  /**
   * Forward pass. With `save` (the default) keeps the checkpointed tensors
   * under `key`; throws before any work if the key is held already or if
   * `maxActivationsInMemory` micro-batches are held.
   */
  forward(x: Tensor, opts?: ForwardOptions): Tensor {
    const key = opts?.key ?? DEFAULT_KEY;
    const save = opts?.save ?? true;
    const context = {
      ...(opts?.training === undefined ? {} : { training: opts.training }),
      ...(opts?.step === undefined ? {} : { step: opts.step }),
      ...(opts?.rowOffset === undefined ? {} : { rowOffset: opts.rowOffset }),
    };
    if (!save) return this.sequential.forward(x, { key, save: false, ...context });
    const outShape = this.sequential.outputShape(x.shape);
    if (this.#states.has(key)) {
      throw new Error(
        `CheckpointedStage: state for key ${fmtKey(key)} is still held; run its backward or ` +
          `dropState(${fmtKey(key)}) before another forward with that key`,
      );
    }
    const cap = this.config.maxActivationsInMemory;
    if (cap > 0 && this.#states.size >= cap) {
      throw new RangeError(
        `CheckpointedStage: maxActivationsInMemory = ${cap} reached: holding keys ${
          [...this.#states.keys()].map(fmtKey).join(", ")
        }; forward of key ${fmtKey(key)} refused`,
      );
    }
    this.#layers.forEach((l, i) => {
      if (l.heldKeys().includes(key)) {
        throw new Error(
          `CheckpointedStage: layer ${this.sequential.names[i]} (${l.kind}) still holds state ` +
            `for key ${fmtKey(key)}; run its backward or dropState(${fmtKey(key)}) first`,
        );
      }
    });
    const { keep, keepOutput } = this.plan;
    const state: StageState = {
      phase: "forward",
      outShape,
      context,
      inputs: new Map(),
      outputs: new Map(),
    };
    let h = x;
    try {
      for (let i = 0; i < this.#layers.length; i++) {
        if (this.#segmentStarts.has(i) && !keep[i]) state.inputs.set(i, retain(h));
        const y = this.#layers[i].forward(h, { key, save: keep[i], ...context });
        if (keepOutput[i]) state.outputs.set(i, retain(y));
        if (h !== x) h.dispose();
        h = y;
      }
    } catch (e) {
      if (h !== x) h.dispose();
      this.#release(state);
      for (const l of this.#layers) l.dropState(key);
      throw e;
    }
    this.#states.set(key, state);
    return h;
  }

  /** B: recomputes each segment from this key's stored tensors, then runs its B passes. */
  backwardInput(dy: Tensor, key?: StateKey): Tensor;
  /**
   * B; with `needInputGrad: false` the first layer skips `dx` where it can
   * and `null` is returned.
   */
  backwardInput(dy: Tensor, key: StateKey | undefined, opts: BackwardOptions): Tensor | null;
  backwardInput(
    dy: Tensor,
    key: StateKey = DEFAULT_KEY,
    opts?: BackwardOptions,
  ): Tensor | null {
    return this.#backward(dy, key, false, needInputGrad(opts));
  }

  /** W: every layer's weight-gradient pass for `key`; frees the key's state. */
  backwardWeight(key: StateKey = DEFAULT_KEY): void {
    const state = this.#states.get(key);
    if (state === undefined || state.phase !== "input") {
      throw new Error(
        `CheckpointedStage: backwardWeight for key ${fmtKey(key)} must follow its backwardInput`,
      );
    }
    for (let i = this.#layers.length - 1; i >= 0; i--) this.#layers[i].backwardWeight(key);
    this.#states.delete(key);
  }

  /** B and W fused per layer (W right after each layer's B); returns `dx`. */
  backward(dy: Tensor, key?: StateKey): Tensor;
  /** B and W fused per layer; with `needInputGrad: false` returns `null`. */
  backward(dy: Tensor, key: StateKey | undefined, opts: BackwardOptions): Tensor | null;
  backward(dy: Tensor, key: StateKey = DEFAULT_KEY, opts?: BackwardOptions): Tensor | null {
    return this.#backward(dy, key, true, needInputGrad(opts));
  }

  dropState(key: StateKey = DEFAULT_KEY): void {
    const state = this.#states.get(key);
    if (state !== undefined) {
      this.#release(state);
      this.#states.delete(key);
    }
    for (const l of this.#layers) l.dropState(key);
  }

  heldKeys(): StateKey[] {
    return [...this.#states.keys()];
  }

  parameters(): Parameter[] {
    return this.sequential.parameters();
  }

  zeroGrad(): void {
    this.sequential.zeroGrad();
  }

  /** Frees every held state, then disposes the layers. */
  dispose(): void {
    for (const key of [...this.#states.keys()]) this.dropState(key);
    this.sequential.dispose();
  }

  #backward(dy: Tensor, key: StateKey, fused: boolean, need: boolean): Tensor | null {
    const state = this.#states.get(key);
    if (state === undefined) {
      throw new Error(
        `CheckpointedStage: backwardInput for key ${fmtKey(key)} without a saved forward`,
      );
    }
    if (state.phase !== "forward") {
      throw new Error(`CheckpointedStage: backwardInput already ran for key ${fmtKey(key)}`);
    }
    if (
      dy.shape.length !== state.outShape.length || dy.shape.some((d, i) => d !== state.outShape[i])
    ) {
      throw new RangeError(
        `CheckpointedStage: dy shape ${fmtShape(dy.shape)} must equal the forward output shape ${
          fmtShape(state.outShape)
        } (key ${fmtKey(key)})`,
      );
    }
    let g: Tensor | null = dy;
    for (let i = this.#layers.length - 1; i >= 0; i--) {
      const seg = this.#segmentByLast.get(i);
      if (seg !== undefined) this.#recompute(seg, state, key);
      // Only the first layer may skip its input gradient (null then).
      const next: Tensor | null = i > 0
        ? this.#layers[i].backwardInput(g!, key)
        : this.#layers[i].backwardInput(g!, key, { needInputGrad: need });
      if (g !== dy) g!.dispose();
      g = next;
      if (fused) this.#layers[i].backwardWeight(key);
    }
    state.phase = "input";
    if (fused) this.#states.delete(key);
    if (!need) {
      g?.dispose(); // a layer that cannot skip dx computed it anyway
      return null;
    }
    if (g === null) throw new Error("CheckpointedStage: the first layer returned no dx");
    return g;
  }

  /** Re-runs a segment's forward with `save` for the layers the plan recomputes. */
  #recompute(seg: CheckpointSegment, state: StageState, key: StateKey): void {
    const { keep } = this.plan;
    let h: Tensor | null = state.inputs.get(seg.start) ?? null;
    state.inputs.delete(seg.start);
    for (let j = seg.start; j < seg.end; j++) {
      if (keep[j]) {
        // Its state was saved in the forward; pick up its output if the next layer needs it.
        h?.dispose();
        h = state.outputs.get(j) ?? null;
        state.outputs.delete(j);
      } else {
        // The same context as the first forward: a recomputed Dropout draws the same mask.
        const y = this.#layers[j].forward(h!, { key, save: true, ...state.context });
        h!.dispose();
        h = y;
      }
    }
    h?.dispose(); // the segment's output was consumed by the forward already
  }

  #release(state: StageState): void {
    for (const t of state.inputs.values()) t.dispose();
    for (const t of state.outputs.values()) t.dispose();
    state.inputs.clear();
    state.outputs.clear();
  }
}
