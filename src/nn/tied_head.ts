/**
 * The output head of a language model whose weight is the token embedding's
 * table (tied input/output embeddings, as GPT-2).
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { keep } from "../tensor/tidy.ts";
import { randomTensor } from "../tensor/random.ts";
import { checkPositiveInt, fmtShape, initRng, rowsOf } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { InitOptions, Layer, LayerCost, LayerSpec, Parameter } from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/** Options of {@linkcode TiedHead}. */
export interface TiedHeadOptions extends InitOptions {
  /**
   * The name, in the whole model, of the parameter this head shares (the
   * token table, `"0.token"` in `createTinyGPT`); `tieParameters` binds the
   * head to the parameter of that name. Default `"0.token"`.
   */
  readonly tiedTo?: string;
}

/** @internal What the layer keeps between its passes. */
interface TiedHeadState {
  x?: Tensor; // [R, dim] (view of the input)
  dy?: Tensor; // [R, vocab] (kept by I for W)
}

/**
 * Logits `y = x Eᵀ` over the last dimension, `E` `[vocabSize, dim]` being
 * the token embedding's table: input `[..., dim]`, output `[..., vocabSize]`,
 * no bias. Until {@linkcode TiedHead.tie} binds it, the head holds its own
 * copy (parameter `weight`); once bound it owns no parameter (the model
 * lists the table once, under the embedding's name) and its W adds into the
 * shared gradient, so one optimizer step sees the embedding's and the
 * head's gradients summed. `createTinyGPT({ tieEmbeddings: true })` and the
 * GPT-2 loader build one; {@linkcode tieParameters} binds it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { TiedHead } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const gpt = createTinyGPT(
 *   { vocabSize: 10, seqLen: 4, dim: 8, heads: 2, layers: 1, tieEmbeddings: true },
 *   be,
 * );
 * const head = gpt.layers[gpt.layers.length - 1] as TiedHead;
 * assert.ok(head.tied);
 * assert.equal(head.parameters().length, 0); // the table is listed once, as "0.token"
 * assert.equal(gpt.parameters()[0].value, head.weight);
 * gpt.dispose();
 * ```
 */
export class TiedHead extends LayerBase<TiedHeadState> {
  /** Always `"TiedHead"`. */
  readonly kind: string = "TiedHead";
  /** Output width (rows of the table). */
  readonly vocabSize: number;
  /** Input width (columns of the table). */
  readonly dim: number;
  /** Name of the shared parameter in the whole model. */
  readonly tiedTo: string;
  #weight: Tensor;
  #grad: Tensor;
  #tied = false;

  /** Creates an unbound head with its own table (normal init, std 0.02). */
  constructor(backend: Backend, vocabSize: number, dim: number, opts?: TiedHeadOptions) {
    super(backend);
    checkPositiveInt("TiedHead", "vocabSize", vocabSize);
    checkPositiveInt("TiedHead", "dim", dim);
    const tiedTo = opts?.tiedTo ?? "0.token";
    if (typeof tiedTo !== "string" || tiedTo === "") {
      throw new TypeError(
        `TiedHead: tiedTo must be a parameter name, got ${describeValue(tiedTo)}`,
      );
    }
    this.vocabSize = vocabSize;
    this.dim = dim;
    this.tiedTo = tiedTo;
    this.#weight = keep(randomTensor(backend, [vocabSize, dim], initRng(opts), 0.02));
    this.#grad = keep(backend.zeros([vocabSize, dim]));
  }

  /** The table `[vocabSize, dim]` (the shared one once tied). */
  get weight(): Tensor {
    return this.#weight;
  }

  /** Whether the head uses another layer's parameter. */
  get tied(): boolean {
    return this.#tied;
  }

  /**
   * Binds the head to `param` (value and gradient), dropping its own copy.
   * Throws a RangeError unless `param` is `[vocabSize, dim]` on this
   * backend; a TypeError when already tied.
   */
  tie(param: Parameter): void {
    if (this.#tied) throw new TypeError(`TiedHead: already tied to ${this.tiedTo}`);
    const s = param?.value?.shape;
    if (s === undefined || s.length !== 2 || s[0] !== this.vocabSize || s[1] !== this.dim) {
      throw new RangeError(
        `TiedHead: the tied parameter ${param?.name} must be [${this.vocabSize}, ${this.dim}], got ${
          s === undefined ? describeValue(param) : fmtShape(s)
        }`,
      );
    }
    if (param.value.backend !== this.backend) {
      throw new TypeError(`TiedHead: the tied parameter ${param.name} lives on another backend`);
    }
    if (this.heldKeys().length > 0) {
      throw new TypeError(`TiedHead: cannot tie while state is held (${this.heldKeys()})`);
    }
    this.#weight.dispose();
    this.#grad.dispose();
    this.#weight = param.value;
    this.#grad = param.grad;
    this.#tied = true;
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return {
      kind: "TiedHead",
      args: { vocabSize: this.vocabSize, dim: this.dim, tiedTo: this.tiedTo },
    };
  }

  /** Own parameter `weight` until tied; none once tied. */
  override parameters(): Parameter[] {
    return this.#tied ? [] : [{ name: "weight", value: this.#weight, grad: this.#grad }];
  }

  /** Clears the own gradient; a tied head leaves the shared one to its owner. */
  override zeroGrad(): void {
    if (!this.#tied) ops.fillInPlace(this.#grad, 0);
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length < 1 || s[s.length - 1] !== this.dim) {
      throw new RangeError(
        `TiedHead: input width must be dim = ${this.dim}, got shape ${fmtShape(s)}`,
      );
    }
    return [...s.slice(0, -1), this.vocabSize];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    // The table is counted once, by the embedding it is tied to.
    return { params: 0, flops: 2 * rowsOf(s) * this.dim * this.vocabSize };
  }

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    _key: unknown,
    save: boolean,
  ): { y: Tensor; state?: TiedHeadState } {
    const rows = rowsOf(x.shape);
    const x2 = x.reshape([rows, this.dim]); // [R, C]
    const y2 = ops.matmul(x2, this.#weight, { transB: true }); // [R, C]·[V, C]ᵀ = [R, V]
    const y = y2.reshape(this.outputShapeOf(x.shape)); // [..., V]
    y2.dispose();
    if (!save) {
      x2.dispose();
      return { y };
    }
    return { y, state: { x: x2 } };
  }

  /** @ignore */
  protected backwardInputImpl(
    dy: Tensor,
    state: TiedHeadState,
    _key: unknown,
    needInputGrad: boolean,
  ): Tensor | null {
    const rows = rowsOf(dy.shape);
    const dy2 = dy.reshape([rows, this.vocabSize]); // [R, V]
    state.dy = dy2;
    if (!needInputGrad) return null;
    const dx2 = ops.matmul(dy2, this.#weight); // [R, V]·[V, C] = [R, C]
    const dx = dx2.reshape([...dy.shape.slice(0, -1), this.dim]); // [..., C]
    dx2.dispose();
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(state: TiedHeadState): void {
    const dw = ops.matmul(state.dy!, state.x!, { transA: true }); // [R, V]ᵀ·[R, C] = [V, C]
    ops.axpyInPlace(this.#grad, 1, dw);
    dw.dispose();
  }

  /** @ignore */
  protected override disposeExtra(): void {
    if (!this.#tied) {
      this.#weight.dispose();
      this.#grad.dispose();
    }
  }
}

/** The `TiedHead` layers at the top level of `layer` (a `Sequential` or a stage wrapping one). */
function headsOf(layer: Layer): TiedHead[] {
  if (layer instanceof TiedHead) return [layer];
  const inner = layer as { layers?: readonly Layer[]; sequential?: Layer };
  if (Array.isArray(inner.layers)) return inner.layers.flatMap(headsOf);
  if (inner.sequential !== undefined) return headsOf(inner.sequential);
  return [];
}

/**
 * Binds every unbound {@linkcode TiedHead} in `layers` (searched through
 * `Sequential`s) to the parameter its `tiedTo` names among the parameters
 * of `layers` (as `layer.parameters()` names them). Returns the heads left
 * unbound (their parameter is held elsewhere, e.g. by another rank).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Sequential, TokenPositionEmbedding } from "@conveyor/core";
 * import { TiedHead, tieParameters } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const head = new TiedHead(be, 10, 4, { tiedTo: "0.token" });
 * const model = new Sequential([new TokenPositionEmbedding(be, 10, 3, 4), head]);
 * assert.equal(model.parameters().length, 3); // token, position, the head's own weight
 * assert.deepEqual(tieParameters([model]), []);
 * assert.deepEqual(model.parameters().map((p) => p.name), ["0.token", "0.position"]);
 * model.dispose();
 * ```
 */
export function tieParameters(layers: readonly Layer[]): TiedHead[] {
  const heads = layers.flatMap(headsOf).filter((h) => !h.tied);
  if (heads.length === 0) return [];
  const params = new Map(layers.flatMap((l) => l.parameters()).map((p) => [p.name, p]));
  const left: TiedHead[] = [];
  for (const h of heads) {
    const p = params.get(h.tiedTo);
    if (p === undefined) left.push(h);
    else h.tie(p);
  }
  return left;
}
