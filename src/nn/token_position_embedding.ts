/**
 * Token embedding plus a learned positional embedding, the input layer of a
 * GPT.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { keep } from "../tensor/tidy.ts";
import { randomTensor } from "../tensor/random.ts";
import {
  checkLayerOptions,
  checkPositive,
  checkPositiveInt,
  fmtShape,
  initRng,
  retain,
} from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { InitOptions, LayerCost, LayerSpec } from "./layer.ts";

/** Options of {@linkcode TokenPositionEmbedding}. */
export interface TokenPositionEmbeddingOptions extends InitOptions {
  /** Standard deviation of the normal init of both tables (default 0.02, as GPT-2). */
  readonly initScale?: number;
}

/** @internal What the layer keeps between its passes. */
interface TokenPositionEmbeddingState {
  ids?: Tensor; // [B, T] (view)
  pos?: Tensor; // [B, T] position ids (view of the cached tensor)
  dy?: Tensor; // [B, T, C] (kept by I for W)
}

/**
 * `y[b, t] = token[ids[b, t]] + position[t]`: input token ids `[B, T]`
 * (integers stored as f32, `T ≤ maxLen`), output `[B, T, dim]`. Parameters
 * `token` `[vocabSize, dim]` and `position` `[maxLen, dim]`. I returns zeros
 * of the ids' shape (ids carry no gradient); W scatter-adds into both tables.
 *
 * @example
 * ```ts
 * import { CpuBackend, TokenPositionEmbedding } from "@conveyor/core";
 * const be = new CpuBackend();
 * const emb = new TokenPositionEmbedding(be, 16, 8, 4, { seed: 1 });
 * const ids = be.fromData(new Float32Array([3, 1, 4, 1, 5, 9]), [2, 3]);
 * const y = emb.forward(ids, { save: false });
 * console.log(y.shape); // [2, 3, 4]
 * ids.dispose();
 * y.dispose();
 * emb.dispose();
 * ```
 */
export class TokenPositionEmbedding extends LayerBase<TokenPositionEmbeddingState> {
  /** Always `"TokenPositionEmbedding"`. */
  readonly kind: string = "TokenPositionEmbedding";
  /** Number of token ids. */
  readonly vocabSize: number;
  /** Longest sequence (rows of the positional table). */
  readonly maxLen: number;
  /** Embedding width. */
  readonly dim: number;
  /** Token table `[vocabSize, dim]`. */
  readonly token: Tensor;
  /** Positional table `[maxLen, dim]`. */
  readonly position: Tensor;
  // Position-id tensors per input shape: tiny, and re-uploading them every
  // step would cost a write per forward.
  #posCache = new Map<string, Tensor>();

  /** Creates both tables from `opts.rng` (or `opts.seed`), tokens first. */
  constructor(
    backend: Backend,
    vocabSize: number,
    maxLen: number,
    dim: number,
    opts?: TokenPositionEmbeddingOptions,
  ) {
    super(backend);
    checkLayerOptions("TokenPositionEmbedding", opts, ["seed", "rng", "initScale"]);
    checkPositiveInt("TokenPositionEmbedding", "vocabSize", vocabSize);
    checkPositiveInt("TokenPositionEmbedding", "maxLen", maxLen);
    checkPositiveInt("TokenPositionEmbedding", "dim", dim);
    const scale = opts?.initScale ?? 0.02;
    checkPositive("TokenPositionEmbedding", "initScale", scale);
    this.vocabSize = vocabSize;
    this.maxLen = maxLen;
    this.dim = dim;
    const rng = initRng(opts);
    this.token = this.addParam("token", randomTensor(backend, [vocabSize, dim], rng, scale));
    this.position = this.addParam("position", randomTensor(backend, [maxLen, dim], rng, scale));
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return {
      kind: "TokenPositionEmbedding",
      args: { vocabSize: this.vocabSize, maxLen: this.maxLen, dim: this.dim },
    };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length !== 2 || s[1] > this.maxLen) {
      throw new RangeError(
        `TokenPositionEmbedding: input must be token ids [batch, T] with T ≤ maxLen = ${this.maxLen}, got shape ${
          fmtShape(s)
        }`,
      );
    }
    return [s[0], s[1], this.dim];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    return {
      params: (this.vocabSize + this.maxLen) * this.dim,
      flops: 2 * s[0] * s[1] * this.dim,
    };
  }

  #positions(b: number, t: number): Tensor {
    const k = `${b}x${t}`;
    let p = this.#posCache.get(k);
    if (p === undefined) {
      const data = new Float32Array(b * t);
      for (let i = 0; i < data.length; i++) data[i] = i % t;
      p = keep(this.backend.fromData(data, [b, t])); // a cache: outlives tidy()
      this.#posCache.set(k, p);
    }
    return p;
  }

  /** @ignore */
  protected forwardImpl(
    ids: Tensor,
    _key: unknown,
    save: boolean,
  ): { y: Tensor; state?: TokenPositionEmbeddingState } {
    const [b, t] = ids.shape;
    const pos = this.#positions(b, t); // [B, T]: t at every (b, t)
    const te = ops.embedding(this.token, ids); // [B, T, C]
    const pe = ops.embedding(this.position, pos); // [B, T, C]
    const y = ops.add(te, pe); // [B, T, C]
    te.dispose();
    pe.dispose();
    return save ? { y, state: { ids: retain(ids), pos: retain(pos) } } : { y };
  }

  /** @ignore */
  protected backwardInputImpl(
    dy: Tensor,
    s: TokenPositionEmbeddingState,
    _key: unknown,
    needInputGrad: boolean,
  ): Tensor | null {
    s.dy = retain(dy);
    // ids are not differentiable: dx is zeros, allocated only when asked for.
    return needInputGrad ? this.backend.zeros(s.ids!.shape) : null;
  }

  /** @ignore */
  protected backwardWeightImpl(s: TokenPositionEmbeddingState): void {
    ops.embeddingBackwardInPlace(this.gradOf(this.token), s.ids!, s.dy!);
    ops.embeddingBackwardInPlace(this.gradOf(this.position), s.pos!, s.dy!);
  }

  /** @ignore */
  protected override disposeExtra(): void {
    for (const p of this.#posCache.values()) p.dispose();
    this.#posCache.clear();
  }
}
