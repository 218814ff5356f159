/**
 * `LayerBase`: the machinery behind every built-in layer, for writing new
 * ones — per-key state with the F → I → W order enforced, parameters with
 * dotted names, sublayers, shape checks before any work.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { keep } from "../tensor/tidy.ts";
import { checkKey, fmtKey, fmtShape, forwardContext, needInputGrad, sameShape } from "./_util.ts";
import { inputGradResult, inputThenWeight } from "./_backward.ts";
import {
  type BackwardOptions,
  DEFAULT_KEY,
  type ForwardContext,
  type ForwardOptions,
  type InputGrad,
  type Layer,
  type LayerCost,
  type LayerSpec,
  type Parameter,
  type StateKey,
} from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/** Exempts every tensor-valued field of a state object from open `tidy` scopes. */
function keepState(state: object): void {
  for (const v of Object.values(state as Record<string, unknown>)) {
    if (v !== null && typeof v === "object" && typeof (v as Tensor).dispose === "function") {
      keep(v as Tensor);
    }
  }
}

/** Disposes every tensor-valued field of a state object and clears it. */
function disposeState(state: object): void {
  const rec = state as Record<string, unknown>;
  for (const k of Object.keys(rec)) {
    const v = rec[k];
    if (v !== null && typeof v === "object" && typeof (v as Tensor).dispose === "function") {
      (v as Tensor).dispose();
    }
    delete rec[k];
  }
}

interface StateRecord<S extends object> {
  phase: "forward" | "input";
  readonly outShape: Shape;
  readonly state: S;
}

interface OwnParam {
  readonly local: string;
  readonly value: Tensor;
  readonly grad: Tensor;
}

/**
 * Base class of the built-in layers, and the easiest way to write a new one.
 * It keeps one state object per key, enforces F → I → W per key (clear
 * errors otherwise), checks inputs (backend, disposal, shape through
 * `outputShapeOf`) before any work, names parameters (`addParam`) and
 * sublayers (`addChild`, prefixing their parameter names), and frees every
 * tensor left in a state object when the state ends.
 *
 * A subclass implements five hooks: `outputShapeOf`, `costOf`,
 * `forwardImpl` (returns `y` and, when saving, the state object; it also
 * gets the training context of the forward and passes it to sublayers),
 * `backwardInputImpl` (returns `dx`; disposes and deletes the state fields W
 * does not need) and `backwardWeightImpl` (adds into the gradients). Inputs
 * to the hooks stay owned by the caller: keep one with `x.reshape(x.shape)`.
 *
 * @example
 * ```ts
 * import { CpuBackend, type Shape } from "@conveyor/core";
 * import { ops, type Tensor } from "@conveyor/core/tensor";
 * import { LayerBase, type LayerCost } from "@conveyor/core/nn";
 *
 * // y = 2x: no parameters, nothing to keep.
 * class Double extends LayerBase {
 *   readonly kind = "Double";
 *   protected outputShapeOf(s: Shape): Shape {
 *     return s;
 *   }
 *   protected costOf(s: Shape): LayerCost {
 *     return { params: 0, flops: s.reduce((a, b) => a * b, 1) };
 *   }
 *   protected forwardImpl(x: Tensor): { y: Tensor } {
 *     return { y: ops.scale(x, 2) };
 *   }
 *   protected backwardInputImpl(dy: Tensor): Tensor {
 *     return ops.scale(dy, 2);
 *   }
 *   protected backwardWeightImpl(): void {}
 * }
 *
 * const be = new CpuBackend();
 * const d = new Double(be);
 * const x = be.fromData(new Float32Array([1, 2]), [1, 2]);
 * const y = d.forward(x, { key: "mb0" });
 * const dx = d.backward(y, "mb0");
 * console.log(await dx.toArray()); // Float32Array [4, 8]
 * ```
 */
export abstract class LayerBase<S extends object = Record<string, Tensor>> implements Layer {
  /** The type name, e.g. `"Linear"`. */
  abstract readonly kind: string;
  /** The backend every parameter and input lives on. */
  readonly backend: Backend;
  #states = new Map<StateKey, StateRecord<S>>();
  #params: OwnParam[] = [];
  #children: [string, Layer][] = [];
  #disposed = false;

  /** Binds the layer to `backend`; parameters and inputs must live there. */
  constructor(backend: Backend) {
    if (backend === null || typeof backend !== "object" || typeof backend.zeros !== "function") {
      throw new TypeError(`layer: backend must be a Backend, got ${describeValue(backend)}`);
    }
    this.backend = backend;
  }

  /** Registers a trainable tensor (takes ownership) and creates its gradient. */
  protected addParam(local: string, value: Tensor): Tensor {
    // Parameters outlive any tidy() scope they are created in.
    this.#params.push({ local, value: keep(value), grad: keep(this.backend.zeros(value.shape)) });
    return value;
  }

  /** The gradient accumulator of an own parameter. */
  protected gradOf(value: Tensor): Tensor {
    const p = this.#params.find((q) => q.value === value);
    if (p === undefined) throw new Error(`${this.kind}: not a parameter of this layer`);
    return p.grad;
  }

  /** Registers a sublayer (takes ownership); its parameters get `name.` prefixed. */
  protected addChild<L extends Layer>(name: string, layer: L): L {
    this.#children.push([name, layer]);
    return layer;
  }

  /** Output shape for a valid input shape; throws a RangeError naming the values otherwise. */
  protected abstract outputShapeOf(inputShape: Shape): Shape;
  /** Cost for an input shape `outputShapeOf` accepted. */
  protected abstract costOf(inputShape: Shape): LayerCost;
  /**
   * Computes `y`; when `save`, returns the state backward needs. `ctx` is
   * the checked training context (`training`, `step`, `rowOffset`), which
   * containers pass on to their sublayers.
   */
  protected abstract forwardImpl(
    x: Tensor,
    key: StateKey,
    save: boolean,
    ctx: ForwardContext,
  ): { y: Tensor; state?: S };
  /**
   * Computes `dx`; disposes (and removes) the fields W does not need. When
   * `needInputGrad` is false it may skip `dx` and return `null` (a returned
   * `dx` is then disposed for it).
   */
  protected abstract backwardInputImpl(
    dy: Tensor,
    state: S,
    key: StateKey,
    needInputGrad: boolean,
  ): Tensor | null;
  /** Accumulates parameter gradients from what I left in the state. */
  protected abstract backwardWeightImpl(state: S, key: StateKey): void;

  /** Output shape for an input shape; throws a RangeError naming the values if incompatible. */
  outputShape(inputShape: Shape): Shape {
    if (!Array.isArray(inputShape)) {
      throw new TypeError(
        `${this.kind}: input shape must be an array, got ${describeValue(inputShape)}`,
      );
    }
    for (const d of inputShape) {
      if (!Number.isInteger(d) || d < 0) {
        throw new RangeError(
          `${this.kind}: input shape must hold non-negative integers, got ${fmtShape(inputShape)}`,
        );
      }
    }
    return this.outputShapeOf(inputShape);
  }

  /** Parameter count and forward FLOPs estimate for an input shape. */
  cost(inputShape: Shape): LayerCost {
    this.outputShape(inputShape);
    return this.costOf(inputShape);
  }

  /** Forward pass; with `save` (the default) keeps what backward needs under `key`. */
  forward(x: Tensor, opts?: ForwardOptions): Tensor {
    this.#checkAlive();
    this.#checkTensor("x", x);
    const key = opts?.key ?? DEFAULT_KEY;
    checkKey(this.kind, key);
    const save = opts?.save ?? true;
    const ctx = forwardContext(this.kind, opts);
    const outShape = this.outputShape(x.shape);
    if (save && this.#states.has(key)) {
      throw new Error(
        `${this.kind}: state for key ${fmtKey(key)} is still held; run its backward or ` +
          `dropState(${fmtKey(key)}) before another forward with that key`,
      );
    }
    let out: { y: Tensor; state?: S };
    try {
      out = this.forwardImpl(x, key, save, ctx);
    } catch (e) {
      // Sublayers that already ran must not keep state for a forward that failed.
      if (save) { for (const [, c] of this.#children) c.dropState(key); }
      throw e;
    }
    const { y, state } = out;
    if (save) {
      // What backward needs survives a tidy() around the forward.
      if (state !== undefined) keepState(state);
      this.#states.set(key, { phase: "forward", outShape, state: state ?? ({} as S) });
    }
    return y;
  }

  /**
   * I: returns `dx` and keeps only what W needs; with `needInputGrad: false`
   * skips `dx` where the layer can, and returns `null`.
   */
  backwardInput<O extends BackwardOptions | undefined = undefined>(
    dy: Tensor,
    key: StateKey = DEFAULT_KEY,
    opts?: O,
  ): InputGrad<O> {
    this.#checkAlive();
    this.#checkTensor("dy", dy);
    const need = needInputGrad(this.kind, opts);
    const rec = this.#states.get(key);
    if (rec === undefined) {
      throw new Error(
        `${this.kind}: backwardInput for key ${fmtKey(key)} without a saved forward`,
      );
    }
    if (rec.phase !== "forward") {
      throw new Error(`${this.kind}: backwardInput already ran for key ${fmtKey(key)}`);
    }
    if (!sameShape(dy.shape, rec.outShape)) {
      throw new RangeError(
        `${this.kind}: dy shape ${fmtShape(dy.shape)} must equal the forward output shape ${
          fmtShape(rec.outShape)
        } (key ${fmtKey(key)})`,
      );
    }
    const dx = this.backwardInputImpl(dy, rec.state, key, need);
    keepState(rec.state); // what W needs survives a tidy() around I
    rec.phase = "input";
    return inputGradResult(need, dx, `${this.kind}: backwardInputImpl`) as InputGrad<O>;
  }

  /** W: adds the parameter gradients, then frees the state of `key`. */
  backwardWeight(key: StateKey = DEFAULT_KEY): void {
    this.#checkAlive();
    const rec = this.#states.get(key);
    if (rec === undefined || rec.phase !== "input") {
      throw new Error(
        `${this.kind}: backwardWeight for key ${fmtKey(key)} must follow its backwardInput`,
      );
    }
    this.backwardWeightImpl(rec.state, key);
    disposeState(rec.state);
    this.#states.delete(key);
  }

  /** B, the full backward: I then W; with `needInputGrad: false` returns `null` (see `backwardInput`). */
  backward<O extends BackwardOptions | undefined = undefined>(
    dy: Tensor,
    key: StateKey = DEFAULT_KEY,
    opts?: O,
  ): InputGrad<O> {
    return inputThenWeight(this, dy, key, opts);
  }

  /** Frees whatever is kept under `key`, in this layer and its sublayers. */
  dropState(key: StateKey = DEFAULT_KEY): void {
    const rec = this.#states.get(key);
    if (rec !== undefined) {
      disposeState(rec.state);
      this.#states.delete(key);
    }
    for (const [, c] of this.#children) c.dropState(key);
  }

  /** Keys that currently hold state. */
  heldKeys(): StateKey[] {
    return [...this.#states.keys()];
  }

  /** Own parameters, then each sublayer's with its name prefixed. */
  parameters(): Parameter[] {
    const out: Parameter[] = this.#params.map((p) => ({
      name: p.local,
      value: p.value,
      grad: p.grad,
    }));
    for (const [name, c] of this.#children) {
      for (const p of c.parameters()) {
        out.push({ name: `${name}.${p.name}`, value: p.value, grad: p.grad });
      }
    }
    return out;
  }

  /** Sets every gradient (own and sublayers') to zero. */
  zeroGrad(): void {
    for (const p of this.#params) ops.fillInPlace(p.grad, 0);
    for (const [, c] of this.#children) c.zeroGrad();
  }

  /** Releases parameters, gradients, sublayers and every kept state; idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const rec of this.#states.values()) disposeState(rec.state);
    this.#states.clear();
    for (const p of this.#params) {
      p.value.dispose();
      p.grad.dispose();
    }
    for (const [, c] of this.#children) c.dispose();
    this.disposeExtra();
  }

  /** Hook for subclasses holding caches. */
  protected disposeExtra(): void {}

  /**
   * The architecture as JSON-able data for `layerFromSpec`. The built-in
   * layers override it; a custom layer that should travel to pipeline
   * workers overrides it too and registers a factory under its kind with
   * `registerLayer`. This default throws a TypeError naming the kind.
   */
  spec(): LayerSpec {
    throw new TypeError(
      `${this.kind}: this layer has no spec(); override spec() and registerLayer("${this.kind}", …) ` +
        "so that pipeline workers can rebuild it",
    );
  }

  #checkAlive(): void {
    if (this.#disposed) throw new TypeError(`${this.kind}: layer used after dispose`);
  }

  #checkTensor(what: string, t: Tensor): void {
    if (t === null || typeof t !== "object" || !("shape" in t) || !("backend" in t)) {
      throw new TypeError(`${this.kind}: ${what} must be a Tensor, got ${describeValue(t)}`);
    }
    if (t.backend !== this.backend) {
      throw new TypeError(
        `${this.kind}: ${what} lives on backend ${t.backend.name}, the layer on another ` +
          `backend instance (${this.backend.name})`,
      );
    }
    if (t.disposed) {
      throw new TypeError(`${this.kind}: ${what} of shape ${fmtShape(t.shape)} was disposed`);
    }
  }
}
