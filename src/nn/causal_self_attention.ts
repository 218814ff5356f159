/**
 * Causal multi-head self-attention.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import {
  checkLayerOptions,
  checkPositiveInt,
  fmtShape,
  initRng,
  moveReshape,
  subOptions,
} from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { ForwardContext, InitOptions, LayerCost, LayerSpec, StateKey } from "./layer.ts";
import { Linear } from "./linear.ts";

/** @internal What the layer keeps between its passes. */
interface AttentionState {
  q?: Tensor; // [B·H, T, D], already scaled by 1/√D
  k?: Tensor; // [B·H, T, D]
  v?: Tensor; // [B·H, T, D]
  p?: Tensor; // [B·H, T, T] attention probabilities
}

// [B, T, 3, H, D] → [3, B, H, T, D] and its inverse.
const SPLIT_HEADS = [2, 0, 3, 1, 4];
const MERGE_HEADS = [1, 3, 0, 2, 4];

/**
 * Causal multi-head self-attention over `[B, T, dim]`: one `Linear`
 * (`qkv`, dim → 3·dim) gives queries, keys and values, split into `heads`
 * heads of width `D = dim / heads`; scores `q kᵀ / √D` are softmaxed with a
 * causal mask (position t sees positions ≤ t); the heads' outputs are merged
 * and projected by a second `Linear` (`proj`). Parameters:
 * `qkv.weight`, `qkv.bias`, `proj.weight`, `proj.bias`.
 *
 * I runs the attention core's backward and both Linears' I passes; W runs
 * only the Linears' W passes (the core has no weights).
 *
 * @example
 * ```ts
 * import { CausalSelfAttention, CpuBackend } from "@conveyor/core";
 * const be = new CpuBackend();
 * const attn = new CausalSelfAttention(be, 8, 2, { seed: 1 });
 * const x = be.zeros([1, 3, 8]);
 * const y = attn.forward(x, { save: false });
 * console.log(y.shape); // [1, 3, 8]
 * x.dispose();
 * y.dispose();
 * attn.dispose();
 * ```
 */
export class CausalSelfAttention extends LayerBase<AttentionState> {
  /** Always `"CausalSelfAttention"`. */
  readonly kind: string = "CausalSelfAttention";
  /** Model width. */
  readonly dim: number;
  /** Number of heads. */
  readonly heads: number;
  /** Width of one head, `dim / heads`. */
  readonly headDim: number;
  /** Input projection dim → 3·dim (queries, keys, values). */
  readonly qkv: Linear;
  /** Output projection dim → dim. */
  readonly proj: Linear;

  /** Creates the layer; `heads` must divide `dim`. */
  constructor(backend: Backend, dim: number, heads: number, opts?: InitOptions) {
    super(backend);
    checkLayerOptions("CausalSelfAttention", opts, ["seed", "rng"]);
    checkPositiveInt("CausalSelfAttention", "dim", dim);
    checkPositiveInt("CausalSelfAttention", "heads", heads);
    if (dim % heads !== 0) {
      throw new RangeError(
        `CausalSelfAttention: heads must divide dim, got heads = ${heads} and dim = ${dim}`,
      );
    }
    this.dim = dim;
    this.heads = heads;
    this.headDim = dim / heads;
    const rng = initRng(opts);
    this.qkv = this.addChild("qkv", new Linear(backend, dim, 3 * dim, { rng }));
    this.proj = this.addChild("proj", new Linear(backend, dim, dim, { rng }));
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "CausalSelfAttention", args: { dim: this.dim, heads: this.heads } };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length !== 3 || s[2] !== this.dim) {
      throw new RangeError(
        `CausalSelfAttention: input must be [batch, T, dim = ${this.dim}], got shape ${
          fmtShape(s)
        }`,
      );
    }
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    const [b, t, c] = s;
    const core = 4 * b * t * t * c + 5 * b * this.heads * t * t; // two matmuls + softmax
    const lin = this.qkv.cost(s);
    const out = this.proj.cost(s);
    return { params: lin.params + out.params, flops: lin.flops + core + out.flops };
  }

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    key: StateKey,
    save: boolean,
    fctx: ForwardContext,
  ): { y: Tensor; state?: AttentionState } {
    const [b, t, c] = x.shape;
    const h = this.heads, d = this.headDim, bh = b * h;
    const o = subOptions(key, save, fctx);
    const qkv = this.qkv.forward(x, o); // [B, T, 3C]
    const qkv5 = moveReshape(qkv, [b, t, 3, h, d]); // [B, T, 3, H, D]
    const heads = ops.permute(qkv5, SPLIT_HEADS); // [3, B, H, T, D]
    qkv5.dispose();
    const q = moveReshape(ops.sliceRows(heads, 0, 1), [bh, t, d]); // [BH, T, D]
    const k = moveReshape(ops.sliceRows(heads, 1, 2), [bh, t, d]); // [BH, T, D]
    const v = moveReshape(ops.sliceRows(heads, 2, 3), [bh, t, d]); // [BH, T, D]
    heads.dispose();
    // 1/√D goes into q ([BH, T, D], a fresh copy) rather than the [BH, T, T]
    // scores: (q/√D) kᵀ = q kᵀ/√D, a T×D pass instead of a T×T one. The
    // scaled q is what backward keeps.
    ops.scaleInPlace(q, 1 / Math.sqrt(d));
    const scores = ops.matmul(q, k, { transB: true }); // [BH, T, D]·[BH, T, D]ᵀ = [BH, T, T]
    const p = ops.softmax(scores, { causal: true }); // [BH, T, T], zero above the diagonal
    scores.dispose();
    const ctx = ops.matmul(p, v); // [BH, T, T]·[BH, T, D] = [BH, T, D]
    const ctx4 = moveReshape(ctx, [b, h, t, d]); // [B, H, T, D]
    const merged = ops.permute(ctx4, [0, 2, 1, 3]); // [B, T, H, D]
    ctx4.dispose();
    const merged3 = moveReshape(merged, [b, t, c]); // [B, T, C]
    const y = this.proj.forward(merged3, o); // [B, T, C]
    merged3.dispose();
    if (!save) {
      for (const z of [q, k, v, p]) z.dispose();
      return { y };
    }
    return { y, state: { q, k, v, p } };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, s: AttentionState, key: StateKey): Tensor {
    const [b, t, c] = dy.shape;
    const h = this.heads, d = this.headDim, bh = b * h;
    const q = s.q!, k = s.k!, v = s.v!, p = s.p!;
    const dmerged = this.proj.backwardInput(dy, key); // [B, T, C]
    const dmerged4 = moveReshape(dmerged, [b, t, h, d]); // [B, T, H, D]
    const dctx4 = ops.permute(dmerged4, [0, 2, 1, 3]); // [B, H, T, D]
    dmerged4.dispose();
    const dctx = moveReshape(dctx4, [bh, t, d]); // [BH, T, D]
    const dv = ops.matmul(p, dctx, { transA: true }); // [BH, T, T]ᵀ·[BH, T, D] = [BH, T, D]
    const dp = ops.matmul(dctx, v, { transB: true }); // [BH, T, D]·[BH, T, D]ᵀ = [BH, T, T]
    dctx.dispose();
    const dscores = ops.softmaxBackward(p, dp); // [BH, T, T], gradient of (q/√D) kᵀ
    dp.dispose();
    // With s = (q/√D) kᵀ: dq = (ds k)/√D, scaled on [BH, T, D]; dk = dsᵀ (q/√D),
    // and q is kept already scaled.
    const dq = ops.matmul(dscores, k); // [BH, T, T]·[BH, T, D] = [BH, T, D]
    ops.scaleInPlace(dq, 1 / Math.sqrt(d));
    const dk = ops.matmul(dscores, q, { transA: true }); // [BH, T, T]ᵀ·[BH, T, D] = [BH, T, D]
    dscores.dispose();
    const parts = [dq, dk, dv].map((g) => moveReshape(g, [1, b, h, t, d])); // each [1, B, H, T, D]
    const dheads = ops.concatRows(parts); // [3, B, H, T, D]
    for (const g of parts) g.dispose();
    const dqkv5 = ops.permute(dheads, MERGE_HEADS); // [B, T, 3, H, D]
    dheads.dispose();
    const dqkv = moveReshape(dqkv5, [b, t, 3 * c]); // [B, T, 3C]
    const dx = this.qkv.backwardInput(dqkv, key); // [B, T, C]
    dqkv.dispose();
    // W needs only what the two Linears kept.
    for (const z of [q, k, v, p]) z.dispose();
    delete s.q;
    delete s.k;
    delete s.v;
    delete s.p;
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(_s: AttentionState, key: StateKey): void {
    this.qkv.backwardWeight(key);
    this.proj.backwardWeight(key);
  }
}
