/**
 * Fully connected layer `y = x Wᵀ + b`.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { randomTensor } from "../tensor/random.ts";
import {
  checkLayerOptions,
  checkPositive,
  checkPositiveInt,
  fmtShape,
  initRng,
  rowsOf,
} from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { InitOptions, LayerCost, LayerSpec } from "./layer.ts";

/** Options of {@linkcode Linear}. */
export interface LinearOptions extends InitOptions {
  /** Whether to add a bias (default `true`). */
  readonly bias?: boolean;
  /** Standard deviation of the normal weight init (default `1/√inFeatures`). */
  readonly initScale?: number;
}

/** @internal What the layer keeps between its passes. */
interface LinearState {
  x?: Tensor; // [R, in] (view of the input)
  dy?: Tensor; // [R, out] (view of the output gradient, kept by I for W)
}

/**
 * Fully connected layer over the last dimension: input `[..., in]`, output
 * `[..., out]`. The weight is stored `[out, in]` (as PyTorch does, so
 * safetensors files read the same), the bias `[out]`; parameter names
 * `weight` and `bias`.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * const be = new CpuBackend();
 * const lin = new Linear(be, 3, 2, { seed: 7 });
 * const x = be.fromData(new Float32Array([1, 2, 3]), [1, 3]);
 * const y = lin.forward(x, { save: false });
 * console.log(y.shape); // [1, 2]
 * x.dispose();
 * y.dispose();
 * lin.dispose();
 * ```
 */
export class Linear extends LayerBase<LinearState> {
  /** Always `"Linear"`. */
  readonly kind: string = "Linear";
  /** Input width. */
  readonly inFeatures: number;
  /** Output width. */
  readonly outFeatures: number;
  /** Weight `[out, in]`. */
  readonly weight: Tensor;
  /** Bias `[out]`, or `null` without bias. */
  readonly bias: Tensor | null;

  /** Creates the layer with weights drawn from `opts.rng` (or `opts.seed`). */
  constructor(backend: Backend, inFeatures: number, outFeatures: number, opts?: LinearOptions) {
    super(backend);
    checkLayerOptions("Linear", opts, ["seed", "rng", "bias", "initScale"]);
    checkPositiveInt("Linear", "inFeatures", inFeatures);
    checkPositiveInt("Linear", "outFeatures", outFeatures);
    const scale = opts?.initScale ?? 1 / Math.sqrt(inFeatures);
    if (scale !== 0) checkPositive("Linear", "initScale", scale);
    this.inFeatures = inFeatures;
    this.outFeatures = outFeatures;
    const rng = initRng(opts);
    this.weight = this.addParam(
      "weight",
      randomTensor(backend, [outFeatures, inFeatures], rng, scale),
    );
    this.bias = (opts?.bias ?? true) ? this.addParam("bias", backend.zeros([outFeatures])) : null;
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return {
      kind: "Linear",
      args: {
        inFeatures: this.inFeatures,
        outFeatures: this.outFeatures,
        bias: this.bias !== null,
      },
    };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length < 1 || s[s.length - 1] !== this.inFeatures) {
      throw new RangeError(
        `Linear: input width must be inFeatures = ${this.inFeatures}, got shape ${fmtShape(s)}`,
      );
    }
    return [...s.slice(0, -1), this.outFeatures];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    const rows = rowsOf(s);
    const params = this.inFeatures * this.outFeatures + (this.bias ? this.outFeatures : 0);
    return { params, flops: 2 * rows * this.inFeatures * this.outFeatures };
  }

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    _key: unknown,
    save: boolean,
  ): { y: Tensor; state?: LinearState } {
    const rows = rowsOf(x.shape);
    const x2 = x.reshape([rows, this.inFeatures]); // [R, in]
    const xw = ops.matmul(x2, this.weight, { transB: true }); // [R, in]·[out, in]ᵀ = [R, out]
    let y2 = xw;
    if (this.bias) {
      y2 = ops.addBias(xw, this.bias); // [R, out] + [out]
      xw.dispose();
    }
    const y = y2.reshape(this.outputShapeOf(x.shape)); // [..., out]
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
    state: LinearState,
    _key: unknown,
    needInputGrad: boolean,
  ): Tensor | null {
    const rows = rowsOf(dy.shape);
    const dy2 = dy.reshape([rows, this.outFeatures]); // [R, out]
    if (!needInputGrad) {
      state.dy = dy2; // W still needs dy and x; the dx matmul is skipped
      return null;
    }
    const dx2 = ops.matmul(dy2, this.weight); // [R, out]·[out, in] = [R, in]
    state.dy = dy2; // W needs dy and x
    const dx = dx2.reshape([...dy.shape.slice(0, -1), this.inFeatures]); // [..., in]
    dx2.dispose();
    return dx;
  }

  /** @ignore */
  protected backwardWeightImpl(state: LinearState): void {
    const x2 = state.x!, dy2 = state.dy!;
    const dw = ops.matmul(dy2, x2, { transA: true }); // [R, out]ᵀ·[R, in] = [out, in]
    ops.axpyInPlace(this.gradOf(this.weight), 1, dw);
    dw.dispose();
    if (this.bias) {
      const db = ops.sumRows(dy2); // [out]
      ops.axpyInPlace(this.gradOf(this.bias), 1, db);
      db.dispose();
    }
  }
}
