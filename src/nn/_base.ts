// Shared machinery of the built-in layers: per-key state bookkeeping with the
// F → B → W order enforced, parameter registration with dotted names, and
// composition of sublayers. Private: users implement `Layer` directly or
// compose built-in layers.

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { Rng } from "../tensor/random.ts";
import {
  DEFAULT_KEY,
  type ForwardOptions,
  type InitOptions,
  type Layer,
  type LayerCost,
  type Parameter,
  type StateKey,
} from "./layer.ts";

/** `[2, 3]` — shapes in error messages. */
export function fmtShape(shape: Shape): string {
  return `[${shape.join(", ")}]`;
}

/** A key as the caller wrote it (strings quoted, so 0 and "0" differ). */
export function fmtKey(key: StateKey): string {
  return typeof key === "string" ? JSON.stringify(key) : String(key);
}

/** Throws a RangeError unless `value` is a positive integer. */
export function checkPositiveInt(where: string, what: string, value: number): void {
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
    throw new RangeError(`${where}: ${what} must be a positive integer, got ${String(value)}`);
  }
}

/** Throws a RangeError unless `value` is a finite positive number. */
export function checkPositive(where: string, what: string, value: number): void {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new RangeError(
      `${where}: ${what} must be a finite positive number, got ${String(value)}`,
    );
  }
}

/** The generator an initialiser draws from. */
export function initRng(opts: InitOptions | undefined): Rng {
  if (opts?.rng !== undefined) return opts.rng;
  return new Rng(opts?.seed ?? 0);
}

/** A same-storage handle the layer owns, so the caller may dispose theirs. */
export function retain(t: Tensor): Tensor {
  return t.reshape(t.shape);
}

/** Reshapes and gives up the original handle: `t` must not be used afterwards. */
export function moveReshape(t: Tensor, shape: Shape): Tensor {
  const v = t.reshape(shape);
  t.dispose();
  return v;
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
 * Base of the built-in layers. Subclasses implement `outputShapeOf`,
 * `costOf`, `forwardImpl`, `backwardInputImpl` and `backwardWeightImpl`;
 * a state object `S` holds the tensors kept between passes (any tensor field
 * left in it is disposed when the state is dropped).
 */
export abstract class LayerBase<S extends object = Record<string, Tensor>> implements Layer {
  abstract readonly kind: string;
  /** The backend every parameter and input lives on. */
  readonly backend: Backend;
  #states = new Map<StateKey, StateRecord<S>>();
  #params: OwnParam[] = [];
  #children: [string, Layer][] = [];
  #disposed = false;

  constructor(backend: Backend) {
    if (backend === null || typeof backend !== "object" || typeof backend.zeros !== "function") {
      throw new TypeError(`layer: backend must be a Backend, got ${String(backend)}`);
    }
    this.backend = backend;
  }

  /** Registers a trainable tensor (takes ownership) and creates its gradient. */
  protected addParam(local: string, value: Tensor): Tensor {
    this.#params.push({ local, value, grad: this.backend.zeros(value.shape) });
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

  protected abstract outputShapeOf(inputShape: Shape): Shape;
  protected abstract costOf(inputShape: Shape): LayerCost;
  /** Computes `y`; when `save`, returns the state backward needs. */
  protected abstract forwardImpl(
    x: Tensor,
    key: StateKey,
    save: boolean,
  ): { y: Tensor; state?: S };
  /** Computes `dx`; disposes (and removes) the fields W does not need. */
  protected abstract backwardInputImpl(dy: Tensor, state: S, key: StateKey): Tensor;
  /** Accumulates parameter gradients from what B left in the state. */
  protected abstract backwardWeightImpl(state: S, key: StateKey): void;

  outputShape(inputShape: Shape): Shape {
    if (!Array.isArray(inputShape)) {
      throw new TypeError(`${this.kind}: input shape must be an array, got ${String(inputShape)}`);
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

  cost(inputShape: Shape): LayerCost {
    this.outputShape(inputShape);
    return this.costOf(inputShape);
  }

  forward(x: Tensor, opts?: ForwardOptions): Tensor {
    this.#checkAlive();
    this.#checkTensor("x", x);
    const key = opts?.key ?? DEFAULT_KEY;
    const save = opts?.save ?? true;
    const outShape = this.outputShape(x.shape);
    if (save && this.#states.has(key)) {
      throw new Error(
        `${this.kind}: state for key ${fmtKey(key)} is still held; run its backward or ` +
          `dropState(${fmtKey(key)}) before another forward with that key`,
      );
    }
    const { y, state } = this.forwardImpl(x, key, save);
    if (save) this.#states.set(key, { phase: "forward", outShape, state: state ?? ({} as S) });
    return y;
  }

  backwardInput(dy: Tensor, key: StateKey = DEFAULT_KEY): Tensor {
    this.#checkAlive();
    this.#checkTensor("dy", dy);
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
    const dx = this.backwardInputImpl(dy, rec.state, key);
    rec.phase = "input";
    return dx;
  }

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

  backward(dy: Tensor, key: StateKey = DEFAULT_KEY): Tensor {
    const dx = this.backwardInput(dy, key);
    this.backwardWeight(key);
    return dx;
  }

  dropState(key: StateKey = DEFAULT_KEY): void {
    const rec = this.#states.get(key);
    if (rec !== undefined) {
      disposeState(rec.state);
      this.#states.delete(key);
    }
    for (const [, c] of this.#children) c.dropState(key);
  }

  heldKeys(): StateKey[] {
    return [...this.#states.keys()];
  }

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

  zeroGrad(): void {
    for (const p of this.#params) ops.fillInPlace(p.grad, 0);
    for (const [, c] of this.#children) c.zeroGrad();
  }

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

  #checkAlive(): void {
    if (this.#disposed) throw new TypeError(`${this.kind}: layer used after dispose`);
  }

  #checkTensor(what: string, t: Tensor): void {
    if (t === null || typeof t !== "object" || !("shape" in t) || !("backend" in t)) {
      throw new TypeError(`${this.kind}: ${what} must be a Tensor, got ${String(t)}`);
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

/** Whether two shapes are equal. */
export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Rows of a shape: product of all dimensions but the last. */
export function rowsOf(shape: Shape): number {
  let n = 1;
  for (let i = 0; i < shape.length - 1; i++) n *= shape[i];
  return n;
}
