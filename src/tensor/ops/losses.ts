/**
 * Softmax cross-entropy and the embedding gather with its scatter-add gradient.
 *
 * @module
 */

import type { CrossEntropyResult } from "../backend.ts";
import {
  aliases,
  checkFinite,
  checkIndices,
  checkNonEmptyRows,
  checkTargets,
  checkTensors,
  fmtShape,
} from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * Softmax cross-entropy of `logits` `[rows, classes]` against integer class
 * indices `targets` `[rows]`: per-row `loss` and the `probs` backward needs.
 * A target that is not an integer in [0, classes) is a RangeError naming
 * the op, the value, its position and the range, on every backend, before
 * any work (on WebGPU for targets from host data; see `WebGPUBackend`).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const logits = be.zeros([1, 4]);
 * const t = be.fromData(new Float32Array([2]), [1]);
 * console.log(await ops.crossEntropy(logits, t).loss.toArray()); // ≈ [ln 4]
 * ```
 */
export function crossEntropy(logits: Tensor, targets: Tensor): CrossEntropyResult {
  const op = "crossEntropy";
  const be = checkTensors(op, { logits, targets });
  checkNonEmptyRows(op, "logits", logits);
  checkTargets(op, "logits", logits, targets);
  checkIndices(op, "target", be, targets, logits.cols);
  return be.crossEntropy(logits, targets);
}

/**
 * Cross-entropy gradient wrt the logits: `(probs - onehot(targets)) * scale`
 * (`scale` is typically 1 / number of rows of the full batch).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const p = be.fromData(new Float32Array([0.5, 0.5]), [1, 2]);
 * const t = be.fromData(new Float32Array([0]), [1]);
 * console.log(await ops.crossEntropyBackward(p, t, 1).toArray()); // [-0.5, 0.5]
 * ```
 */
export function crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor {
  const op = "crossEntropyBackward";
  const be = checkTensors(op, { probs, targets });
  checkNonEmptyRows(op, "probs", probs);
  checkTargets(op, "probs", probs, targets);
  checkFinite(op, "scale", scale);
  checkIndices(op, "target", be, targets, probs.cols);
  return be.crossEntropyBackward(probs, targets, scale);
}

/**
 * Row gather: `table` `[V, C]` and integer `ids` of any shape → `[...ids.shape, C]`.
 * An id that is not an integer in [0, V) is a RangeError naming the op,
 * the id, its position and the range, on every backend, before any work
 * (on WebGPU for ids from host data; see `WebGPUBackend`).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const table = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const ids = be.fromData(new Float32Array([1, 1, 0]), [3]);
 * console.log(await ops.embedding(table, ids).toArray()); // [3, 4, 3, 4, 1, 2]
 * ```
 */
export function embedding(table: Tensor, ids: Tensor): Tensor {
  const op = "embedding";
  const be = checkTensors(op, { table, ids });
  if (table.shape.length !== 2) {
    throw new RangeError(`${op}: table must be 2-D [V, C], got shape ${fmtShape(table.shape)}`);
  }
  checkIndices(op, "id", be, ids, table.shape[0]);
  return be.embedding(table, ids);
}

/**
 * In place scatter-add: `dTable[ids[i]] += dy[i]` for every position `i`;
 * `dy` is `[...ids.shape, C]`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const dTable = be.zeros([2, 1]);
 * const ids = be.fromData(new Float32Array([1, 1]), [2]);
 * ops.embeddingBackwardInPlace(dTable, ids, be.fromData(new Float32Array([1, 2]), [2, 1]));
 * console.log(await dTable.toArray()); // Float32Array [0, 3]
 * ```
 */
export function embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void {
  const op = "embeddingBackwardInPlace";
  const be = checkTensors(op, { dTable, ids, dy });
  if (dTable.shape.length !== 2) {
    throw new RangeError(`${op}: dTable must be 2-D [V, C], got shape ${fmtShape(dTable.shape)}`);
  }
  const C = dTable.shape[1];
  if (dy.cols !== C || dy.size !== ids.size * C || dy.shape.length === 0) {
    throw new RangeError(
      `${op}: dy must have shape ${fmtShape([...ids.shape, C])} (ids ${
        fmtShape(ids.shape)
      } by dTable columns ${C}), got ${fmtShape(dy.shape)}`,
    );
  }
  if (aliases(dTable, dy) || aliases(dTable, ids)) {
    throw new RangeError(`${op}: dTable must not share storage with ids or dy`);
  }
  checkIndices(op, "id", be, ids, dTable.shape[0]);
  be.embeddingBackwardInPlace(dTable, ids, dy);
}
