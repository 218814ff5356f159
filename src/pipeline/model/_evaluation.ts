// The last stage's share of evaluate(): a micro-batch's loss (its share of
// the batch's mean) and, for cross-entropy, its correct rows, with the loss
// gradient dropped at once. Not exported from the package.

import type { Backend, Tensor } from "../../tensor/mod.ts";
import { crossEntropyLoss, type LossResult, mseLoss } from "../../nn/losses.ts";

/**
 * Rows of `logits` (row-major, `classes` per row) whose first maximal entry
 * is at the class id in `targets` (one per row): torch.argmax picks the
 * first maximum too.
 */
export function countCorrect(logits: Float32Array, targets: Float32Array, classes: number): number {
  let correct = 0;
  for (let r = 0; r < targets.length; r++) {
    const base = r * classes;
    let best = 0;
    for (let c = 1; c < classes; c++) if (logits[base + c] > logits[base + best]) best = c;
    if (best === targets[r]) correct++;
  }
  return correct;
}

/** A micro-batch's evaluation, read back asynchronously. */
export interface MicroBatchEvaluation {
  readonly loss: Promise<number>;
  readonly correct?: Promise<number>;
}

/**
 * Evaluates prediction `y` (taken over: disposed when read) against
 * `targets` (shape `targetShape`) with `totalRows` rows in the whole batch.
 */
export function evaluateMicroBatch(
  backend: Backend,
  loss: "cross-entropy" | "mse",
  y: Tensor,
  targets: Float32Array,
  targetShape: number[],
  totalRows: number,
): MicroBatchEvaluation {
  let r: LossResult;
  const t = backend.fromData(targets, targetShape);
  try {
    r = loss === "mse" ? mseLoss(y, t, { totalRows }) : crossEntropyLoss(y, t, { totalRows });
  } catch (e) {
    y.dispose();
    throw e;
  } finally {
    t.dispose();
  }
  r.grad.dispose();
  const l = r.loss;
  const lossValue = l.toArray().then((a) => a[0]).finally(() => l.dispose());
  if (loss !== "cross-entropy") {
    y.dispose();
    return { loss: lossValue };
  }
  const classes = y.shape[y.shape.length - 1];
  const correct = y.toArray().then((d) => countCorrect(d, targets, classes)).finally(() =>
    y.dispose()
  );
  return { loss: lossValue, correct };
}

/**
 * The training loss of prediction `y` (taken over: disposed) against
 * `targets` (shape `targetShape`) with `totalRows` rows in the whole batch:
 * the loss and its gradient, kept for the backward.
 */
export function trainingLoss(
  backend: Backend,
  loss: "cross-entropy" | "mse",
  y: Tensor,
  targets: Float32Array,
  targetShape: number[],
  totalRows: number,
): LossResult {
  const t = backend.fromData(targets, targetShape);
  try {
    return loss === "mse" ? mseLoss(y, t, { totalRows }) : crossEntropyLoss(y, t, { totalRows });
  } finally {
    t.dispose();
    y.dispose();
  }
}
