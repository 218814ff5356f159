/**
 * RMS normalisation over the last dimension.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { checkLayerOptions, checkPositiveInt, fmtShape, retain } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { LayerCost, LayerSpec } from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/**
 * Options of {@linkcode RMSNorm}.
 *
 * @example
 * ```ts
 * import type { RMSNormOptions } from "@conveyor/core";
 * const opts: RMSNormOptions = { eps: 1e-6 }; // as LLaMA
 * console.log(opts.eps);
 * ```
 */
export interface RMSNormOptions {
  /**
   * Added to the mean square before the square root; default 2^-23 ≈
   * 1.19e-7, the f32 machine epsilon that PyTorch's `nn.RMSNorm` uses when
   * given none.
   */
  readonly eps?: number;
}

/** @internal What the layer keeps between its passes. */
interface RMSNormState {
  x?: Tensor; // [..., C] (view of the input)
  rstd?: Tensor; // [R]
  dy?: Tensor; // [..., C] (kept by I for W)
}

/**
 * RMS norm `y = x / sqrt(mean(x²) + eps) · weight` over the last dimension
 * of width `dim`, as PyTorch's `nn.RMSNorm` (parameter `weight`, ones at
 * init). I: `dx = rstd · (g − x̂ · mean(g · x̂))` with `g = dy · weight`,
 * `x̂ = x · rstd`; W: `dweight = Σ_rows dy · x̂`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, RMSNorm } from "@conveyor/core";
 * const be = new CpuBackend();
 * const norm = new RMSNorm(be, 2, { eps: 0 });
 * const x = be.fromData(new Float32Array([3, 4]), [1, 2]);
 * const y = await norm.forward(x, { save: false }).toArray();
 * const rms = Math.sqrt((9 + 16) / 2);
 * assert.ok(Math.abs(y[0] - 3 / rms) < 1e-6 && Math.abs(y[1] - 4 / rms) < 1e-6);
 * assert.deepEqual(norm.parameters().map((p) => p.name), ["weight"]);
 * norm.dispose();
 * ```
 */
export class RMSNorm extends LayerBase<RMSNormState> {
  /** Always `"RMSNorm"`. */
  readonly kind: string = "RMSNorm";
  /** Normalised width. */
  readonly dim: number;
  /** Mean-square epsilon. */
  readonly eps: number;
  /** The scale `[dim]`. */
  readonly weight: Tensor;

  /** Creates the layer with `weight` = 1. */
  constructor(backend: Backend, dim: number, opts?: RMSNormOptions) {
    super(backend);
    checkLayerOptions("RMSNorm", opts, ["eps"]);
    checkPositiveInt("RMSNorm", "dim", dim);
    const eps = opts?.eps ?? 2 ** -23;
    if (typeof eps !== "number" || !Number.isFinite(eps) || eps < 0) {
      throw new RangeError(
        `RMSNorm: eps must be a finite non-negative number, got ${describeValue(eps)}`,
      );
    }
    this.dim = dim;
    this.eps = eps;
    this.weight = this.addParam("weight", ops.ones(backend, [dim]));
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "RMSNorm", args: { dim: this.dim, eps: this.eps } };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length < 1 || s[s.length - 1] !== this.dim) {
      throw new RangeError(
        `RMSNorm: input width must be dim = ${this.dim}, got shape ${fmtShape(s)}`,
      );
    }
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: this.dim, flops: 4 * n };
  }

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    _key: unknown,
    save: boolean,
  ): { y: Tensor; state?: RMSNormState } {
    const { y, rstd } = ops.rmsNorm(x, this.weight, this.eps); // y [..., C]; rstd [R]
    if (!save) {
      rstd.dispose();
      return { y };
    }
    return { y, state: { x: retain(x), rstd } };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, s: RMSNormState): Tensor {
    // dx = rstd · (g − x̂ · mean(g · x̂)), g = dy · w — [..., C]
    const dx = ops.rmsNormBackwardInput(dy, s.x!, s.rstd!, this.weight);
    s.dy = retain(dy);
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(s: RMSNormState): void {
    // dw = Σ_rows dy · x̂ — [C]
    const dw = ops.rmsNormBackwardWeight(s.dy!, s.x!, s.rstd!);
    ops.axpyInPlace(this.gradOf(this.weight), 1, dw);
    dw.dispose();
  }
}
