/**
 * Row-wise ops over the last dimension: softmax, layer norm, RMS norm and
 * log-sum-exp, with their gradients.
 *
 * @module
 */

import type { Backend, LayerNormResult, LayerNormStats, RmsNormResult } from "../backend.ts";
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
  sameShape,
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
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
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
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
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
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
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

/** The backend of a layer norm backward's tensors, once each is checked. */
function checkLayerNormBackward(
  op: string,
  dy: Tensor,
  x: Tensor,
  stats: LayerNormStats,
  gamma: Tensor | null,
): Backend {
  if (stats === null || typeof stats !== "object") {
    throw new TypeError(
      `${op}: stats must be the forward's { mean, rstd } (its LayerNormResult), got ${
        describe(stats)
      }`,
    );
  }
  const { mean, rstd } = stats;
  const be = checkTensors(
    op,
    gamma === null ? { dy, x, mean, rstd } : { dy, x, mean, rstd, gamma },
  );
  checkNonEmptyRows(op, "x", x);
  checkSameShape(op, "dy", dy, "x", x);
  checkRowStat(op, "mean", mean, x);
  checkRowStat(op, "rstd", rstd, x);
  return be;
}

/**
 * Layer norm input gradient (the I pass), from the forward's input `x` and
 * its statistics (`mean`, `rstd`: the forward's result serves).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const fwd = ops.layerNorm(x, g, be.zeros([2]));
 * const dx = ops.layerNormBackwardInput(be.fromData(new Float32Array([1, 1]), [1, 2]), x, fwd, g);
 * console.log(await dx.toArray()); // ≈ [0, 0]
 * ```
 */
export function layerNormBackwardInput(
  dy: Tensor,
  x: Tensor,
  stats: LayerNormStats,
  gamma: Tensor,
): Tensor {
  const op = "layerNormBackwardInput";
  const be = checkLayerNormBackward(op, dy, x, stats, gamma);
  checkColVector(op, "gamma", gamma, "x", x);
  return be.layerNormBackwardInput(dy, x, stats, gamma);
}

/**
 * Layer norm weight gradients (the W pass): `dgamma = Σ_rows dy·x̂`,
 * `dbeta = Σ_rows dy`, each `[cols]`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 3]), [1, 2]);
 * const g = be.fromData(new Float32Array([1, 1]), [2]);
 * const fwd = ops.layerNorm(x, g, be.zeros([2]));
 * const dy = be.fromData(new Float32Array([1, 1]), [1, 2]);
 * const { dbeta } = ops.layerNormBackwardWeight(dy, x, fwd);
 * console.log(await dbeta.toArray()); // Float32Array [1, 1]
 * ```
 */
export function layerNormBackwardWeight(
  dy: Tensor,
  x: Tensor,
  stats: LayerNormStats,
): { dgamma: Tensor; dbeta: Tensor } {
  const be = checkLayerNormBackward("layerNormBackwardWeight", dy, x, stats, null);
  return be.layerNormBackwardWeight(dy, x, stats);
}

/**
 * RMS norm over the last dimension: `y = x · rstd · weight` with
 * `rstd = 1 / sqrt(mean(x²) + eps)`, returning `y` and the per-row `rstd`
 * (`[rows]`) that the gradients need. `weight` is `[cols]`; `eps` defaults
 * to 2^-23 (f32 machine epsilon, as PyTorch's `nn.RMSNorm`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([3, 4]), [1, 2]);
 * const { y, rstd } = ops.rmsNorm(x, ops.ones(be, [2]), 0);
 * const r = (await rstd.toArray())[0]; // 1 / sqrt((9 + 16) / 2)
 * assert.ok(Math.abs(r - 1 / Math.sqrt(12.5)) < 1e-7);
 * assert.deepEqual(y.shape, [1, 2]);
 * ```
 */
export function rmsNorm(x: Tensor, weight: Tensor, eps: number = 2 ** -23): RmsNormResult {
  const op = "rmsNorm";
  const be = checkTensors(op, { x, weight });
  checkNonEmptyRows(op, "x", x);
  checkColVector(op, "weight", weight, "x", x);
  if (checkFinite(op, "eps", eps) < 0) {
    throw new RangeError(`${op}: eps must be non-negative, got ${eps}`);
  }
  return be.rmsNorm(x, weight, eps);
}

/**
 * RMS norm input gradient (the I pass) from the forward's `rstd`: with
 * `g = dy · weight` and `x̂ = x · rstd`, `dx = rstd · (g − x̂ · mean_row(g · x̂))`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 1]), [1, 2]);
 * const w = ops.ones(be, [2]);
 * const { rstd } = ops.rmsNorm(x, w, 0);
 * // y = x / rms(x) is flat along x itself: dy ∝ x gives dx = 0.
 * const dx = ops.rmsNormBackwardInput(x, x, rstd, w);
 * assert.deepEqual([...await dx.toArray()], [0, 0]);
 * ```
 */
export function rmsNormBackwardInput(dy: Tensor, x: Tensor, rstd: Tensor, weight: Tensor): Tensor {
  const op = "rmsNormBackwardInput";
  const be = checkTensors(op, { dy, x, rstd, weight });
  checkNonEmptyRows(op, "x", x);
  checkSameShape(op, "dy", dy, "x", x);
  checkRowStat(op, "rstd", rstd, x);
  checkColVector(op, "weight", weight, "x", x);
  return be.rmsNormBackwardInput(dy, x, rstd, weight);
}

/**
 * RMS norm weight gradient (the W pass): `Σ_rows dy · x · rstd`, `[cols]`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([2, 2, -2, -2]), [2, 2]);
 * const { rstd } = ops.rmsNorm(x, ops.ones(be, [2]), 0); // rstd = 1/2 per row
 * const dw = ops.rmsNormBackwardWeight(ops.ones(be, [2, 2]), x, rstd);
 * assert.deepEqual([...await dw.toArray()], [0, 0]); // (2 − 2) / 2
 * ```
 */
export function rmsNormBackwardWeight(dy: Tensor, x: Tensor, rstd: Tensor): Tensor {
  const op = "rmsNormBackwardWeight";
  const be = checkTensors(op, { dy, x, rstd });
  checkNonEmptyRows(op, "x", x);
  checkSameShape(op, "dy", dy, "x", x);
  checkRowStat(op, "rstd", rstd, x);
  return be.rmsNormBackwardWeight(dy, x, rstd);
}

/**
 * `log Σ exp(x)` over the last dimension, numerically stable (the row
 * maximum m is taken out: `m + log Σ exp(x − m)`), giving `x.shape`
 * without its last dimension (`[]` for a 1-D `x`). A row holding NaN gives
 * NaN; a row whose maximum is ±∞ gives that maximum.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1000, 1000, 0, 0]), [2, 2]);
 * const lse = await ops.logSumExp(x).toArray(); // no overflow at 1000
 * assert.ok(Math.abs(lse[0] - (1000 + Math.LN2)) < 1e-3);
 * assert.ok(Math.abs(lse[1] - Math.LN2) < 1e-6);
 * ```
 */
export function logSumExp(x: Tensor): Tensor {
  const be = checkTensors("logSumExp", { x });
  checkNonEmptyRows("logSumExp", "x", x);
  return be.logSumExp(x);
}

/**
 * Log-sum-exp input gradient: `dx = dy · exp(x − y)` per row (the row
 * softmax scaled by the row's `dy`), from the forward input `x`, its output
 * `y` and the output gradient `dy` (both of `y`'s shape).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.zeros([1, 4]);
 * const y = ops.logSumExp(x); // log 4
 * const dx = ops.logSumExpBackward(x, y, ops.ones(be, [1]));
 * const got = [...await dx.toArray()];
 * assert.ok(got.every((v) => Math.abs(v - 0.25) < 1e-7)); // softmax of a flat row
 * ```
 */
export function logSumExpBackward(x: Tensor, y: Tensor, dy: Tensor): Tensor {
  const op = "logSumExpBackward";
  const be = checkTensors(op, { x, y, dy });
  checkNonEmptyRows(op, "x", x);
  const lead = x.shape.slice(0, -1);
  for (const [name, t] of [["y", y], ["dy", dy]] as const) {
    if (!sameShape(t.shape, lead)) {
      throw new RangeError(
        `${op}: ${name} must have shape ${fmtShape(lead)} (x ${
          fmtShape(x.shape)
        } without its last dimension), got ${fmtShape(t.shape)}`,
      );
    }
  }
  const col = [...lead, 1];
  const yc = y.reshape(col), dyc = dy.reshape(col);
  const d = be.binary("sub", x, yc, x.shape);
  const e = be.unary("exp", d);
  d.dispose();
  const dx = be.binary("mul", e, dyc, x.shape);
  e.dispose();
  yc.dispose();
  dyc.dispose();
  return dx;
}
