/**
 * Row-wise ops over the last dimension: softmax and layer norm with their gradients.
 *
 * @module
 */

import type { LayerNormResult } from "../backend.ts";
import {
  checkBool,
  checkColVector,
  checkFinite,
  checkNonEmptyRows,
  checkRank,
  checkRowStat,
  checkSameShape,
  checkTensors,
  describe,
  fmtShape,
} from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/** Options of {@linkcode softmax}. */
export interface SoftmaxOptions {
  /**
   * Causal mask: `x` is `[..., T, T]` and entry `j` of row `i` (`i` = row
   * index mod T) gets probability exactly 0 when `j > i`.
   */
  readonly causal?: boolean;
}

/**
 * Softmax over the last dimension (numerically stable: the row maximum is
 * subtracted first).
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.zeros([2, 2]);
 * console.log(await ops.softmax(x, { causal: true }).toArray()); // [1, 0, 0.5, 0.5]
 * ```
 */
export function softmax(x: Tensor, opts: SoftmaxOptions = {}): Tensor {
  const op = "softmax";
  const be = checkTensors(op, { x });
  if (opts === null || typeof opts !== "object") {
    throw new TypeError(`${op}: opts must be an object, got ${describe(opts)}`);
  }
  const causal = checkBool(op, "causal", opts.causal);
  checkRank(op, "x", x, 1);
  if (causal) {
    const r = x.shape.length;
    if (r < 2 || x.shape[r - 2] !== x.shape[r - 1]) {
      throw new RangeError(
        `${op}: causal softmax needs x of shape [..., T, T], got ${fmtShape(x.shape)}`,
      );
    }
  }
  return be.softmax(x, causal);
}

/**
 * Softmax input gradient from its output: `y * (dy - Σ_row(dy * y))`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const y = be.fromData(new Float32Array([0.5, 0.5]), [1, 2]);
 * const dy = be.fromData(new Float32Array([1, 0]), [1, 2]);
 * console.log(await ops.softmaxBackward(y, dy).toArray()); // [0.25, -0.25]
 * ```
 */
export function softmaxBackward(y: Tensor, dy: Tensor): Tensor {
  const be = checkTensors("softmaxBackward", { y, dy });
  checkRank("softmaxBackward", "y", y, 1);
  checkSameShape("softmaxBackward", "y", y, "dy", dy);
  return be.softmaxBackward(y, dy);
}

/**
 * Layer norm over the last dimension: `(x - mean) * rstd * gamma + beta`,
 * with `rstd = 1 / sqrt(var + eps)` (population variance). Returns the
 * output and the per-row `mean` and `rstd` (`[rows]`) that backward needs.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const { y } = ops.layerNorm(x, g, be.zeros([2]));
 * console.log(await y.toArray()); // ≈ [-1, 1]
 * ```
 */
export function layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps = 1e-5): LayerNormResult {
  const op = "layerNorm";
  const be = checkTensors(op, { x, gamma, beta });
  checkNonEmptyRows(op, "x", x);
  checkColVector(op, "gamma", gamma, "x", x);
  checkColVector(op, "beta", beta, "x", x);
  if (checkFinite(op, "eps", eps) <= 0) {
    throw new RangeError(`${op}: eps must be positive, got ${eps}`);
  }
  return be.layerNorm(x, gamma, beta, eps);
}

function checkLayerNormBackward(
  op: string,
  dy: Tensor,
  x: Tensor,
  mean: Tensor,
  rstd: Tensor,
): void {
  checkNonEmptyRows(op, "x", x);
  checkSameShape(op, "dy", dy, "x", x);
  checkRowStat(op, "mean", mean, x);
  checkRowStat(op, "rstd", rstd, x);
}

/**
 * Layer norm input gradient (the B pass), from the forward's `mean` and `rstd`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const { mean, rstd } = ops.layerNorm(x, g, be.zeros([2]));
 * const dx = ops.layerNormBackwardInput(be.fromData(new Float32Array([1, 1]), [1, 2]), x, mean, rstd, g);
 * console.log(await dx.toArray()); // ≈ [0, 0]
 * ```
 */
export function layerNormBackwardInput(
  dy: Tensor,
  x: Tensor,
  mean: Tensor,
  rstd: Tensor,
  gamma: Tensor,
): Tensor {
  const op = "layerNormBackwardInput";
  const be = checkTensors(op, { dy, x, mean, rstd, gamma });
  checkLayerNormBackward(op, dy, x, mean, rstd);
  checkColVector(op, "gamma", gamma, "x", x);
  return be.layerNormBackwardInput(dy, x, mean, rstd, gamma);
}

/**
 * Layer norm weight gradients (the W pass): `dgamma = Σ_rows dy·x̂`,
 * `dbeta = Σ_rows dy`, each `[cols]`.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const { mean, rstd } = ops.layerNorm(x, g, be.zeros([2]));
 * const dy = be.fromData(new Float32Array([1, 1]), [1, 2]);
 * const { dbeta } = ops.layerNormBackwardWeight(dy, x, mean, rstd);
 * console.log(await dbeta.toArray()); // Float32Array [1, 1]
 * ```
 */
export function layerNormBackwardWeight(
  dy: Tensor,
  x: Tensor,
  mean: Tensor,
  rstd: Tensor,
): { dgamma: Tensor; dbeta: Tensor } {
  const op = "layerNormBackwardWeight";
  const be = checkTensors(op, { dy, x, mean, rstd });
  checkLayerNormBackward(op, dy, x, mean, rstd);
  return be.layerNormBackwardWeight(dy, x, mean, rstd);
}
