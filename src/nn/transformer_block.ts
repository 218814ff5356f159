/**
 * Pre-norm Transformer block with residual connections.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { checkLayerOptions, checkPositiveInt, fmtShape, initRng } from "./_util.ts";
import { Block } from "./_block.ts";
import { CausalSelfAttention } from "./causal_self_attention.ts";
import type { ForwardOptions, InitOptions, LayerCost, LayerSpec, StateKey } from "./layer.ts";
import { LayerNorm } from "./layer_norm.ts";
import { MLP } from "./mlp.ts";

/** Options of {@linkcode TransformerBlock}. */
export interface TransformerBlockOptions extends InitOptions {
  /** Hidden width of the MLP (default `4 · dim`). */
  readonly hidden?: number;
  /** Epsilon of both layer norms (default `1e-5`). */
  readonly eps?: number;
}

/**
 * GPT-2 style block on `[B, T, dim]`:
 * `h = x + attn(ln1(x))`, `y = h + mlp(ln2(h))`. Parameters are prefixed
 * `ln1.`, `attn.`, `ln2.`, `mlp.`. The residual additions need no state;
 * I runs the sublayers' I passes (the gradient flows through both branches
 * of each residual), W runs each sublayer's W.
 *
 * @example
 * ```ts
 * import { CpuBackend, TransformerBlock } from "@conveyor/core";
 * const be = new CpuBackend();
 * const block = new TransformerBlock(be, 8, 2, { seed: 4 });
 * const x = be.zeros([1, 5, 8]);
 * const y = block.forward(x, { save: false });
 * console.log(y.shape); // [1, 5, 8]
 * x.dispose();
 * y.dispose();
 * block.dispose();
 * ```
 */
export class TransformerBlock extends Block {
  /** Always `"TransformerBlock"`. */
  readonly kind: string = "TransformerBlock";
  /** Model width. */
  readonly dim: number;
  /** Norm before attention. */
  readonly ln1: LayerNorm;
  /** Causal self-attention. */
  readonly attn: CausalSelfAttention;
  /** Norm before the MLP. */
  readonly ln2: LayerNorm;
  /** Feed-forward block. */
  readonly mlp: MLP;

  /** Creates the block; `heads` must divide `dim`. */
  constructor(backend: Backend, dim: number, heads: number, opts?: TransformerBlockOptions) {
    super(backend);
    checkLayerOptions("TransformerBlock", opts, ["seed", "rng", "hidden"]);
    checkPositiveInt("TransformerBlock", "dim", dim);
    checkPositiveInt("TransformerBlock", "heads", heads);
    if (dim % heads !== 0) {
      throw new RangeError(
        `TransformerBlock: heads must divide dim, got heads = ${heads} and dim = ${dim}`,
      );
    }
    this.dim = dim;
    const rng = initRng(opts);
    const eps = opts?.eps;
    this.ln1 = this.addSublayer("ln1", new LayerNorm(backend, dim, { eps }));
    this.attn = this.addSublayer("attn", new CausalSelfAttention(backend, dim, heads, { rng }));
    this.ln2 = this.addSublayer("ln2", new LayerNorm(backend, dim, { eps }));
    this.mlp = this.addSublayer("mlp", new MLP(backend, dim, { hidden: opts?.hidden, rng }));
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return {
      kind: "TransformerBlock",
      args: {
        dim: this.dim,
        heads: this.attn.heads,
        hidden: this.mlp.hidden,
        // Only where it differs from the default, so earlier specs read the same.
        ...(this.ln1.eps === 1e-5 ? {} : { eps: this.ln1.eps }),
      },
    };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length !== 3 || s[2] !== this.dim) {
      throw new RangeError(
        `TransformerBlock: input must be [batch, T, dim = ${this.dim}], got shape ${fmtShape(s)}`,
      );
    }
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    const parts = [this.ln1, this.attn, this.ln2, this.mlp].map((l) => l.cost(s));
    return {
      params: parts.reduce((a, p) => a + p.params, 0),
      flops: parts.reduce((a, p) => a + p.flops, 0) + 2 * n, // + two residual adds
    };
  }

  /** @ignore */
  protected forwardBlock(x: Tensor, o: ForwardOptions): Tensor {
    const a = this.ln1.forward(x, o); // [B, T, C]
    const att = this.attn.forward(a, o); // [B, T, C]
    a.dispose();
    const h = ops.add(x, att); // [B, T, C] residual
    att.dispose();
    const c = this.ln2.forward(h, o); // [B, T, C]
    const m = this.mlp.forward(c, o); // [B, T, C]
    c.dispose();
    const y = ops.add(h, m); // [B, T, C] residual
    h.dispose();
    m.dispose();
    return y;
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, _s: unknown, key: StateKey): Tensor {
    // y = h + mlp(ln2(h))  ⇒  dh = dy + ln2ᴮ(mlpᴮ(dy))
    const dc = this.mlp.backwardInput(dy, key); // [B, T, C]
    const dhBranch = this.ln2.backwardInput(dc, key); // [B, T, C]
    dc.dispose();
    const dh = ops.add(dy, dhBranch); // [B, T, C]
    dhBranch.dispose();
    // h = x + attn(ln1(x))  ⇒  dx = dh + ln1ᴮ(attnᴮ(dh))
    const da = this.attn.backwardInput(dh, key); // [B, T, C]
    const dxBranch = this.ln1.backwardInput(da, key); // [B, T, C]
    da.dispose();
    const dx = ops.add(dh, dxBranch); // [B, T, C]
    dh.dispose();
    dxBranch.dispose();
    return dx;
  }
}
