/**
 * Token embedding: a lookup table indexed by integer ids.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { randomTensor } from "../tensor/random.ts";
import { checkLayerOptions, checkPositive, checkPositiveInt, initRng, retain } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { InitOptions, LayerCost, LayerSpec } from "./layer.ts";

/** Options of {@linkcode Embedding}. */
export interface EmbeddingOptions extends InitOptions {
  /** Standard deviation of the normal init (default 1, as PyTorch). */
  readonly initScale?: number;
}

/** @internal What the layer keeps between its passes. */
interface EmbeddingState {
  ids?: Tensor; // [...] integer ids stored as f32 (view)
  dy?: Tensor; // [..., C] (kept by I for W)
}

/**
 * Lookup table `weight` `[numEmbeddings, dim]`: input integer ids (stored as
 * f32) of any shape `[...]`, output `[..., dim]`. Ids must lie in
 * `[0, numEmbeddings)`. Ids carry no gradient, so I returns zeros of the
 * ids' shape (keeping the layer contract uniform) and W scatter-adds `dy`
 * into the table's gradient.
 *
 * @example
 * ```ts
 * import { CpuBackend, Embedding } from "@conveyor/core";
 * const be = new CpuBackend();
 * const emb = new Embedding(be, 10, 4, { seed: 3 });
 * const ids = be.fromData(new Float32Array([1, 7, 7]), [1, 3]);
 * const y = emb.forward(ids, { save: false });
 * console.log(y.shape); // [1, 3, 4]
 * ids.dispose();
 * y.dispose();
 * emb.dispose();
 * ```
 */
export class Embedding extends LayerBase<EmbeddingState> {
  /** Always `"Embedding"`. */
  readonly kind: string = "Embedding";
  /** Number of rows of the table (vocabulary size). */
  readonly numEmbeddings: number;
  /** Width of each row. */
  readonly dim: number;
  /** The table `[numEmbeddings, dim]`. */
  readonly weight: Tensor;

  /** Creates the table with normal entries times `opts.initScale`. */
  constructor(backend: Backend, numEmbeddings: number, dim: number, opts?: EmbeddingOptions) {
    super(backend);
    checkLayerOptions("Embedding", opts, ["seed", "rng", "initScale"]);
    checkPositiveInt("Embedding", "numEmbeddings", numEmbeddings);
    checkPositiveInt("Embedding", "dim", dim);
    const scale = opts?.initScale ?? 1;
    checkPositive("Embedding", "initScale", scale);
    this.numEmbeddings = numEmbeddings;
    this.dim = dim;
    this.weight = this.addParam(
      "weight",
      randomTensor(backend, [numEmbeddings, dim], initRng(opts), scale),
    );
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "Embedding", args: { numEmbeddings: this.numEmbeddings, dim: this.dim } };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    return [...s, this.dim];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: this.numEmbeddings * this.dim, flops: n * this.dim };
  }

  /** @ignore */
  protected forwardImpl(
    ids: Tensor,
    _key: unknown,
    save: boolean,
  ): { y: Tensor; state?: EmbeddingState } {
    const y = ops.embedding(this.weight, ids); // [V, C] gathered by [...] → [..., C]
    return save ? { y, state: { ids: retain(ids) } } : { y };
  }

  /** @ignore */
  protected backwardInputImpl(
    dy: Tensor,
    s: EmbeddingState,
    _key: unknown,
    needInputGrad: boolean,
  ): Tensor | null {
    s.dy = retain(dy);
    // ids are not differentiable: dx is zeros, allocated only when asked for.
    return needInputGrad ? this.backend.zeros(s.ids!.shape) : null;
  }

  /** @ignore */
  protected backwardWeightImpl(s: EmbeddingState): void {
    ops.embeddingBackwardInPlace(this.gradOf(this.weight), s.ids!, s.dy!); // dW[ids[i]] += dy[i]
  }
}
