/**
 * Layer normalisation over the last dimension.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { checkLayerOptions, checkPositive, checkPositiveInt, fmtShape, retain } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { LayerCost, LayerSpec } from "./layer.ts";

/** Options of {@linkcode LayerNorm}. */
export interface LayerNormOptions {
  /** Added to the variance before the square root (default `1e-5`). */
  readonly eps?: number;
}

/** @internal What the layer keeps between its passes. */
interface LayerNormState {
  x?: Tensor; // [..., C] (view of the input)
  mean?: Tensor; // [R]
  rstd?: Tensor; // [R]
  dy?: Tensor; // [..., C] (kept by I for W)
}

/**
 * Layer norm `y = (x − mean) · rstd · γ + β` over the last dimension of
 * width `dim`. Parameters `weight` (γ, ones) and `bias` (β, zeros), as
 * PyTorch names them. Deterministic: no random initialisation.
 *
 * @example
 * ```ts
 * import { CpuBackend, LayerNorm } from "@conveyor/core";
 * const be = new CpuBackend();
 * const ln = new LayerNorm(be, 4);
 * const x = be.fromData(new Float32Array([1, 2, 3, 4]), [1, 4]);
 * const y = ln.forward(x, { save: false });
 * console.log(await y.toArray()); // about [-1.34, -0.45, 0.45, 1.34]
 * x.dispose();
 * y.dispose();
 * ln.dispose();
 * ```
 */
export class LayerNorm extends LayerBase<LayerNormState> {
  /** Always `"LayerNorm"`. */
  readonly kind: string = "LayerNorm";
  /** Normalised width. */
  readonly dim: number;
  /** Variance epsilon. */
  readonly eps: number;
  /** γ `[dim]`. */
  readonly weight: Tensor;
  /** β `[dim]`. */
  readonly bias: Tensor;

  /** Creates the layer with γ = 1 and β = 0. */
  constructor(backend: Backend, dim: number, opts?: LayerNormOptions) {
    super(backend);
    checkLayerOptions("LayerNorm", opts, ["eps"]);
    checkPositiveInt("LayerNorm", "dim", dim);
    const eps = opts?.eps ?? 1e-5;
    checkPositive("LayerNorm", "eps", eps);
    this.dim = dim;
    this.eps = eps;
    this.weight = this.addParam("weight", backend.fromData(new Float32Array(dim).fill(1), [dim]));
    this.bias = this.addParam("bias", backend.zeros([dim]));
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "LayerNorm", args: { dim: this.dim, eps: this.eps } };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length < 1 || s[s.length - 1] !== this.dim) {
      throw new RangeError(
        `LayerNorm: input width must be dim = ${this.dim}, got shape ${fmtShape(s)}`,
      );
    }
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: 2 * this.dim, flops: 8 * n };
  }

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    _key: unknown,
    save: boolean,
  ): { y: Tensor; state?: LayerNormState } {
    const { y, mean, rstd } = ops.layerNorm(x, this.weight, this.bias, this.eps); // y [..., C]; mean, rstd [R]
    if (!save) {
      mean.dispose();
      rstd.dispose();
      return { y };
    }
    return { y, state: { x: retain(x), mean, rstd } };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, s: LayerNormState): Tensor {
    // dx = rstd · (dŷ − mean(dŷ) − x̂ · mean(dŷ · x̂)), dŷ = dy · γ  — [..., C]
    const dx = ops.layerNormBackwardInput(dy, s.x!, { mean: s.mean!, rstd: s.rstd! }, this.weight);
    s.dy = retain(dy);
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(s: LayerNormState): void {
    // dγ = Σ_rows dy · x̂, dβ = Σ_rows dy — each [C]
    const { dgamma, dbeta } = ops.layerNormBackwardWeight(s.dy!, s.x!, {
      mean: s.mean!,
      rstd: s.rstd!,
    });
    ops.axpyInPlace(this.gradOf(this.weight), 1, dgamma);
    ops.axpyInPlace(this.gradOf(this.bias), 1, dbeta);
    dgamma.dispose();
    dbeta.dispose();
  }
}
