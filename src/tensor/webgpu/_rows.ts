/**
 * WebGPU glue of the row-wise ops, one workgroup per row: softmax
 * (`softmax.wgsl`, `softmax_backward.wgsl`) and layer norm
 * (`layer_norm*.wgsl`; its weight gradient is staged through the column
 * sums of `_reductions.ts`), RMS norm (`rms_norm*.wgsl`, likewise) and
 * log-sum-exp (`log_sum_exp.wgsl`).
 *
 * @module
 */

import type { LayerNormResult, LayerNormStats, RmsNormResult } from "../backend.ts";
import { rowCount } from "../_rows.ts";
import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, MAX_GROUPS } from "./_device.ts";
import { KERNELS } from "./_kernels.ts";
import { columnGroups, columnSums, SUM_CHUNK } from "./_reductions.ts";

/** Row softmax, optionally causal. */
export function softmax(core: DeviceCore, x: Tensor, causal: boolean): Tensor {
  const out = core.newTensor(x.shape);
  core.perRow(KERNELS.softmax, { CAUSAL: causal }, x, {}, [buf(x), buf(out)]);
  return out;
}

/** Softmax input gradient. */
export function softmaxBackward(core: DeviceCore, y: Tensor, dy: Tensor): Tensor {
  const out = core.newTensor(y.shape);
  core.perRow(KERNELS.softmaxBackward, {}, y, {}, [buf(y), buf(dy), buf(out)]);
  return out;
}

/** Layer norm forward. */
export function layerNorm(
  core: DeviceCore,
  x: Tensor,
  gamma: Tensor,
  beta: Tensor,
  eps: number,
): LayerNormResult {
  const rows = rowCount(x);
  const y = core.newTensor(x.shape);
  const mean = core.newTensor([rows]);
  const rstd = core.newTensor([rows]);
  core.perRow(KERNELS.layerNorm, {}, x, { eps }, [
    buf(x),
    buf(gamma),
    buf(beta),
    buf(y),
    buf(mean),
    buf(rstd),
  ]);
  return { y, mean, rstd };
}

/** Layer norm input gradient. */
export function layerNormBackwardInput(
  core: DeviceCore,
  dy: Tensor,
  x: Tensor,
  { mean, rstd }: LayerNormStats,
  gamma: Tensor,
): Tensor {
  const out = core.newTensor(x.shape);
  const bindings = [buf(dy), buf(x), buf(mean), buf(rstd), buf(gamma), buf(out)];
  core.perRow(KERNELS.layerNormBackwardInput, {}, x, {}, bindings);
  return out;
}

/** Layer norm weight gradients. */
export function layerNormBackwardWeight(
  core: DeviceCore,
  dy: Tensor,
  x: Tensor,
  { mean, rstd }: LayerNormStats,
): { dgamma: Tensor; dbeta: Tensor } {
  const cols = x.cols, rows = rowCount(x);
  const dgamma = core.newTensor([cols]);
  const dbeta = core.newTensor([cols]);
  if (cols === 0) return { dgamma, dbeta };
  if (rows === 0) {
    core.clear(buf(dgamma), cols);
    core.clear(buf(dbeta), cols);
    return { dgamma, dbeta };
  }
  const chunk = Math.max(SUM_CHUNK, ceilDiv(rows, MAX_GROUPS));
  const chunks = ceilDiv(rows, chunk);
  const partial = core.temp(chunks * 2 * cols * 4);
  core.dispatch(
    KERNELS.layerNormBackwardWeight,
    {},
    { rows, cols, chunk },
    [buf(dy), buf(x), buf(mean), buf(rstd), partial],
    [columnGroups(cols), chunks, 1],
  );
  const both = core.temp(2 * cols * 4);
  columnSums(core, partial, chunks, 2 * cols, both);
  core.pool.release(partial);
  core.copyBytes(both, 0, buf(dgamma), 0, cols * 4);
  core.copyBytes(both, cols * 4, buf(dbeta), 0, cols * 4);
  core.pool.release(both);
  return { dgamma, dbeta };
}

/** RMS norm forward. */
export function rmsNorm(core: DeviceCore, x: Tensor, weight: Tensor, eps: number): RmsNormResult {
  const y = core.newTensor(x.shape);
  const rstd = core.newTensor([rowCount(x)]);
  core.perRow(KERNELS.rmsNorm, {}, x, { eps }, [buf(x), buf(weight), buf(y), buf(rstd)]);
  return { y, rstd };
}

/** RMS norm input gradient. */
export function rmsNormBackwardInput(
  core: DeviceCore,
  dy: Tensor,
  x: Tensor,
  rstd: Tensor,
  weight: Tensor,
): Tensor {
  const out = core.newTensor(x.shape);
  core.perRow(KERNELS.rmsNormBackwardInput, {}, x, {}, [
    buf(dy),
    buf(x),
    buf(rstd),
    buf(weight),
    buf(out),
  ]);
  return out;
}

/** RMS norm weight gradient: per-chunk partial column sums, then their sum. */
export function rmsNormBackwardWeight(
  core: DeviceCore,
  dy: Tensor,
  x: Tensor,
  rstd: Tensor,
): Tensor {
  const cols = x.cols, rows = rowCount(x);
  const dw = core.newTensor([cols]);
  if (cols === 0) return dw;
  if (rows === 0) {
    core.clear(buf(dw), cols);
    return dw;
  }
  const chunk = Math.max(SUM_CHUNK, ceilDiv(rows, MAX_GROUPS));
  const chunks = ceilDiv(rows, chunk);
  const partial = core.temp(chunks * cols * 4);
  core.dispatch(
    KERNELS.rmsNormBackwardWeight,
    {},
    { rows, cols, chunk },
    [buf(dy), buf(x), buf(rstd), partial],
    [columnGroups(cols), chunks, 1],
  );
  columnSums(core, partial, chunks, cols, buf(dw));
  core.pool.release(partial);
  return dw;
}

/** Row-wise log Σ exp → `x.shape` without its last dimension. */
export function logSumExp(core: DeviceCore, x: Tensor): Tensor {
  const out = core.newTensor(x.shape.slice(0, -1));
  core.perRow(KERNELS.logSumExp, {}, x, {}, [buf(x), buf(out)]);
  return out;
}
