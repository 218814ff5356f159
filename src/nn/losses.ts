/**
 * Losses that return their value and their gradient in one call, with an
 * explicit rule for micro-batches.
 *
 * **The micro-batch rule.** The loss of a batch of N rows is the mean of the
 * per-row losses, `L = (1/N) Σ_rows ℓ(row)`. A micro-batch holding n of those
 * rows passes `totalRows: N` and gets its *partial* loss `(1/N) Σ_its rows ℓ`
 * and the gradient of that partial loss, i.e. scaled by 1/N (not 1/n). The
 * partial losses and the gradients of all micro-batches then simply add up
 * to the full-batch loss and gradient, also when micro-batches have unequal
 * sizes, with no re-weighting afterwards. Without `totalRows` the micro-batch
 * is the whole batch (N = n).
 *
 * A "row" is one prediction: for cross-entropy one position (so logits
 * `[B, T, V]` have B·T rows); for mean squared error one row of the last
 * dimension, whose per-row loss is the mean over its columns (so the full
 * batch's loss is the mean over all elements, as PyTorch's `MSELoss`).
 *
 * @module
 */

import type { Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { fmtShape, rowsOf, sameShape } from "./_util.ts";
import { describeValue } from "../text/describe.ts";

/** Options of the losses. */
export interface LossOptions {
  /**
   * N: the number of rows in the whole batch this call is part of (default:
   * the rows of this call). Must be at least the rows of this call.
   */
  readonly totalRows?: number;
}

/** A loss value and its gradient with respect to the prediction. */
export interface LossResult {
  /** `(1/N) Σ ℓ(row)` over this call's rows, shape `[1]`; read it with `toArray()`. */
  readonly loss: Tensor;
  /** d loss / d prediction, same shape as the prediction. */
  readonly grad: Tensor;
}

function normalizer(where: string, rows: number, opts: LossOptions | undefined): number {
  const n = opts?.totalRows ?? rows;
  if (typeof n !== "number" || !Number.isInteger(n) || n <= 0 || n < rows) {
    throw new RangeError(
      `${where}: totalRows must be an integer ≥ the ${rows} rows of this call, got ${
        describeValue(n)
      }`,
    );
  }
  return n;
}

/**
 * Mean squared error: per row the mean over its C columns of
 * `(pred − target)²`; loss `(1/N) Σ_rows`, gradient `2 (pred − target) / (N·C)`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { mseLoss } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const pred = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const target = be.zeros([2, 2]);
 * const { loss, grad } = mseLoss(pred, target);
 * console.log((await loss.toArray())[0]); // 7.5
 * for (const t of [pred, target, loss, grad]) t.dispose();
 * ```
 */
export function mseLoss(pred: Tensor, target: Tensor, opts?: LossOptions): LossResult {
  if (!sameShape(pred.shape, target.shape)) {
    throw new RangeError(
      `mseLoss: target shape ${fmtShape(target.shape)} must equal pred shape ${
        fmtShape(pred.shape)
      }`,
    );
  }
  const cols = pred.shape.length === 0 ? 1 : pred.shape[pred.shape.length - 1];
  const n = normalizer("mseLoss", rowsOf(pred.shape.length === 0 ? [1] : pred.shape), opts);
  const diff = ops.sub(pred, target); // [..., C]
  const sq = ops.sumSquares(diff); // [1]
  const loss = ops.scale(sq, 1 / (n * cols)); // [1]
  sq.dispose();
  const grad = ops.scale(diff, 2 / (n * cols)); // [..., C]
  diff.dispose();
  return { loss, grad };
}

/**
 * Softmax cross-entropy of `logits` `[..., V]` against integer class ids
 * `targets` `[...]` (stored as f32, in `[0, V)`): per row
 * `−log softmax(logits)[target]`; loss `(1/N) Σ_rows`, gradient
 * `(softmax(logits) − onehot(target)) / N`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { crossEntropyLoss } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const logits = be.zeros([2, 4]); // uniform over 4 classes
 * const targets = be.fromData(new Float32Array([0, 3]), [2]);
 * const { loss, grad } = crossEntropyLoss(logits, targets);
 * console.log((await loss.toArray())[0]); // ln 4 ≈ 1.386
 * for (const t of [logits, targets, loss, grad]) t.dispose();
 * ```
 */
export function crossEntropyLoss(
  logits: Tensor,
  targets: Tensor,
  opts?: LossOptions,
): LossResult {
  const ls = logits.shape;
  const expected: Shape = ls.slice(0, -1);
  if (ls.length < 2 || !sameShape(targets.shape, expected)) {
    throw new RangeError(
      `crossEntropyLoss: targets shape ${fmtShape(targets.shape)} must be the logits shape ${
        fmtShape(ls)
      } without its last dimension${ls.length < 2 ? " (logits need at least 2 dimensions)" : ""}`,
    );
  }
  const rows = rowsOf(ls);
  const v = ls[ls.length - 1];
  const n = normalizer("crossEntropyLoss", rows, opts);
  const l2 = logits.reshape([rows, v]); // [R, V]
  const t1 = targets.reshape([rows]); // [R]
  const { loss: perRow, probs } = ops.crossEntropy(l2, t1); // [R], [R, V]
  const total = ops.sum(perRow); // [1]
  perRow.dispose();
  const loss = ops.scale(total, 1 / n); // [1]
  total.dispose();
  const g2 = ops.crossEntropyBackward(probs, t1, 1 / n); // [R, V]
  probs.dispose();
  l2.dispose();
  t1.dispose();
  const grad = g2.reshape(ls); // [..., V]
  g2.dispose();
  return { loss, grad };
}
