/**
 * `Sequential`: a list of layers applied in order, the unit the pipeline cuts
 * into stages at layer boundaries.
 *
 * @module
 */

import { checkLayerOptions } from "./_util.ts";
import type { Shape, Tensor } from "../tensor/mod.ts";
import { checkKey, fmtKey, fmtShape, forwardContext, needInputGrad, subOptions } from "./_util.ts";
import { inputGradResult, inputThenWeight } from "./_backward.ts";
import {
  type BackwardOptions,
  DEFAULT_KEY,
  type ForwardOptions,
  type InputGrad,
  type Layer,
  type LayerCost,
  type LayerSpec,
  type Parameter,
  type StateKey,
} from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/** Options of {@linkcode Sequential}. */
export interface SequentialOptions {
  /**
   * Names of the layers, used as parameter-name prefixes (default `"0"`,
   * `"1"`, …). Slices keep the names of the full model, so a stage's
   * parameters are named as in the whole model's safetensors file.
   */
  readonly names?: readonly string[];
  /** When given, the chain of shapes is checked at construction. */
  readonly inputShape?: Shape;
}

/**
 * Layers applied in order. Implements {@linkcode Layer}, so it nests, and
 * exposes `layers` so the pipeline can cut it at layer boundaries with
 * {@linkcode Sequential.slice}. Every forward checks the whole chain of
 * shapes before any work. A `Sequential` owns its layers: `dispose` disposes
 * them (slices share layer objects with the model they came from).
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, ReLU, Sequential } from "@conveyor/core";
 * const be = new CpuBackend();
 * const model = new Sequential([
 *   new Linear(be, 4, 8, { seed: 1 }),
 *   new ReLU(be),
 *   new Linear(be, 8, 2, { seed: 2 }),
 * ]);
 * console.log(model.outputShape([5, 4])); // [5, 2]
 * console.log(model.parameters().map((p) => p.name)); // ["0.weight", "0.bias", "2.weight", "2.bias"]
 * const head = model.slice(2, 3); // shares the last Linear
 * console.log(head.parameters()[0].name); // "2.weight"
 * model.dispose();
 * ```
 */
export class Sequential implements Layer {
  readonly kind: string = "Sequential";
  /** The layers, in order. */
  readonly layers: readonly Layer[];
  /** The layers' names (parameter-name prefixes), in order. */
  readonly names: readonly string[];

  /** Creates the chain; checks shapes at once when `opts.inputShape` is given. */
  constructor(layers: readonly Layer[], opts?: SequentialOptions) {
    if (!Array.isArray(layers)) {
      throw new TypeError(`Sequential: layers must be an array, got ${describeValue(layers)}`);
    }
    if (layers.length === 0) {
      throw new RangeError("Sequential: needs at least one layer, got 0");
    }
    checkLayerOptions("Sequential", opts, ["names", "inputShape"]);
    layers.forEach((l, i) => {
      if (
        l === null || typeof l !== "object" || typeof l.forward !== "function" ||
        typeof l.backwardInput !== "function" || typeof l.outputShape !== "function"
      ) {
        throw new TypeError(`Sequential: layers[${i}] is not a Layer, got ${describeValue(l)}`);
      }
    });
    layers.forEach((l, i) => {
      const j = layers.indexOf(l);
      if (j !== i) {
        throw new RangeError(
          `Sequential: layers[${i}] is the same object as layers[${j}]; a layer can appear once`,
        );
      }
    });
    const names = opts?.names ?? layers.map((_, i) => String(i));
    if (names.length !== layers.length) {
      throw new RangeError(
        `Sequential: names must have one entry per layer, got ${
          describeValue(names.length)
        } names for ${layers.length} layers`,
      );
    }
    if (new Set(names).size !== names.length || names.some((n) => n === "")) {
      throw new RangeError(
        `Sequential: names must be unique and non-empty, got ${JSON.stringify(names)}`,
      );
    }
    this.layers = Object.freeze([...layers]);
    this.names = Object.freeze([...names]);
    if (opts?.inputShape !== undefined) this.outputShape(opts.inputShape);
  }

  /**
   * The layers `[start, end)` as a new `Sequential` sharing the same layer
   * objects and keeping their names.
   */
  slice(start: number, end: number = this.layers.length): Sequential {
    const n = this.layers.length;
    if (
      !Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > n || start >= end
    ) {
      throw new RangeError(
        `Sequential.slice: need integers 0 ≤ start < end ≤ ${n}, got start = ${start}, end = ${end}`,
      );
    }
    return new Sequential(this.layers.slice(start, end), { names: this.names.slice(start, end) });
  }

  /** The shape after every layer: entry i is the output shape of layer i. */
  shapes(inputShape: Shape): Shape[] {
    const out: Shape[] = [];
    let s = inputShape;
    for (let i = 0; i < this.layers.length; i++) {
      const l = this.layers[i];
      try {
        s = l.outputShape(s);
      } catch (e) {
        const from = i === 0
          ? "the input"
          : `the output of layer ${this.names[i - 1]} (${this.layers[i - 1].kind})`;
        const msg = `Sequential: layer ${this.names[i]} (${l.kind}) cannot take ${from}, shape ${
          fmtShape(s)
        }: ${(e as Error).message}`;
        throw e instanceof TypeError ? new TypeError(msg, { cause: e }) : new RangeError(msg, {
          cause: e,
        });
      }
      out.push(s);
    }
    return out;
  }

  outputShape(inputShape: Shape): Shape {
    const s = this.shapes(inputShape);
    return s[s.length - 1];
  }

  /** Each layer's cost for the shape that reaches it (for partitioning). */
  costs(inputShape: Shape): LayerCost[] {
    const shapes = this.shapes(inputShape);
    return this.layers.map((l, i) => l.cost(i === 0 ? inputShape : shapes[i - 1]));
  }

  cost(inputShape: Shape): LayerCost {
    let params = 0, flops = 0;
    for (const c of this.costs(inputShape)) {
      params += c.params;
      flops += c.flops;
    }
    return { params, flops };
  }

  /**
   * Runs every layer in order, passing on `key`, `save` and the training
   * context (`training`, `step`, `rowOffset`) unchanged.
   */
  forward(x: Tensor, opts?: ForwardOptions): Tensor {
    const key = opts?.key ?? DEFAULT_KEY;
    checkKey("Sequential", key);
    const save = opts?.save ?? true;
    const sub = subOptions(key, save, forwardContext("Sequential", opts));
    this.outputShape(x.shape);
    if (save) {
      // Checked for every layer first so a refused forward leaves no layer half-run.
      this.layers.forEach((l, i) => {
        if (l.heldKeys().includes(key)) {
          throw new Error(
            `Sequential: layer ${this.names[i]} (${l.kind}) still holds state for key ${
              fmtKey(key)
            }; run its backward or dropState(${fmtKey(key)}) first`,
          );
        }
      });
    }
    let h = x;
    try {
      for (const l of this.layers) {
        const next = l.forward(h, sub);
        if (h !== x) h.dispose();
        h = next;
      }
    } catch (e) {
      // A failed forward (e.g. an id out of range) leaves no layer holding its key.
      if (h !== x) h.dispose();
      if (save) this.dropState(key);
      throw e;
    }
    return h;
  }

  /**
   * I through every layer, last to first; returns `dx`. With
   * `needInputGrad: false` the first layer skips `dx` where it can (the
   * others' input gradients are needed) and `null` is returned.
   */
  backwardInput<O extends BackwardOptions | undefined = undefined>(
    dy: Tensor,
    key: StateKey = DEFAULT_KEY,
    opts?: O,
  ): InputGrad<O> {
    const need = needInputGrad(this.kind, opts);
    let g = dy;
    for (let i = this.layers.length - 1; i >= 1; i--) {
      const next = this.layers[i].backwardInput(g, key);
      if (g !== dy) g.dispose();
      g = next;
    }
    const dx = this.layers[0].backwardInput(g, key, { needInputGrad: need });
    if (g !== dy) g.dispose();
    // A layer that cannot skip dx computed it anyway: it is disposed.
    return inputGradResult(need, dx, `Sequential: layer ${this.names[0]}`) as InputGrad<O>;
  }

  backwardWeight(key: StateKey = DEFAULT_KEY): void {
    for (let i = this.layers.length - 1; i >= 0; i--) this.layers[i].backwardWeight(key);
  }

  /** B, the full backward: I then W; with `needInputGrad: false` returns `null` (see `backwardInput`). */
  backward<O extends BackwardOptions | undefined = undefined>(
    dy: Tensor,
    key: StateKey = DEFAULT_KEY,
    opts?: O,
  ): InputGrad<O> {
    return inputThenWeight(this, dy, key, opts);
  }

  dropState(key: StateKey = DEFAULT_KEY): void {
    for (const l of this.layers) l.dropState(key);
  }

  heldKeys(): StateKey[] {
    const keys = new Set<StateKey>();
    for (const l of this.layers) for (const k of l.heldKeys()) keys.add(k);
    return [...keys];
  }

  parameters(): Parameter[] {
    const out: Parameter[] = [];
    this.layers.forEach((l, i) => {
      for (const p of l.parameters()) {
        out.push({ name: `${this.names[i]}.${p.name}`, value: p.value, grad: p.grad });
      }
    });
    return out;
  }

  zeroGrad(): void {
    for (const l of this.layers) l.zeroGrad();
  }

  dispose(): void {
    for (const l of this.layers) l.dispose();
  }

  /**
   * `{ kind: "Sequential", args: { layers: [specs], names } }`; throws a
   * TypeError naming the first layer that has no `spec()`.
   */
  spec(): LayerSpec {
    const layers = this.layers.map((l, i) => {
      if (typeof l.spec !== "function") {
        throw new TypeError(
          `Sequential: layer ${this.names[i]} (${l.kind}) has no spec(); give it one and ` +
            "register its kind with registerLayer",
        );
      }
      try {
        return l.spec();
      } catch (e) {
        throw new TypeError(`Sequential: layer ${this.names[i]}: ${(e as Error).message}`, {
          cause: e,
        });
      }
    });
    return { kind: "Sequential", args: { layers, names: [...this.names] } };
  }
}
