/**
 * Data-parallel batch shards: a step's batch cut along dim 0 into D equal
 * shards, one per pipeline replica.
 *
 * Why equal shards keep training the same: the loss of a batch of `N` rows
 * is the mean `L = (1/N) Σ_rows ℓ(row)`, so its gradient is
 * `(1/N) Σ_rows ∇ℓ(row)`. Cut into D shards of `N/D` rows each, shard `k`'s
 * mean loss `L_k = (D/N) Σ_{rows of k} ∇ℓ(row)` has the gradient
 * `(D/N) Σ_{rows of k} ∇ℓ(row)`, and the average over the D shards,
 * `(1/D) Σ_k ∇L_k = (1/N) Σ_rows ∇ℓ(row)`, is the whole batch's gradient.
 * With unequal shards the plain average would weigh some rows more, so
 * unequal shards are refused.
 *
 * @module
 */

import type { TrainingBatch } from "./batch.ts";
import { describeValue, formatShape } from "../../text/describe.ts";

function describeData(x: unknown): string {
  return x instanceof Float32Array ? `a Float32Array of ${x.length}` : describeValue(x);
}

/**
 * Splits a step's batch into `replicas` equal shards along dim 0, in row
 * order: shard `k` holds rows `[k·R, (k+1)·R)` of the inputs and of the
 * targets, `R = rows / replicas`. Each shard is a {@linkcode TrainingBatch}
 * of shape `[R, ...rest]` with its own copies of the data (a copy may be
 * handed to another thread). The average of the shards' mean-loss gradients
 * equals the whole batch's gradient.
 *
 * Checks before any copy: `replicas` a positive integer; `shape` positive
 * integers; `inputs` a Float32Array of `shape`'s size; `targets` a
 * Float32Array holding the same whole number of values per row; the rows a
 * multiple of `replicas` (a `RangeError` naming both otherwise). A batch
 * with `microBatchSizes` is refused: those split the whole batch, not a
 * shard (each replica's schedule splits its own shard).
 *
 * For Dropout to draw the same masks as on the whole batch, a shard's rows
 * start at row `k·R` of the batch.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { shardBatch } from "@conveyor/core/data";
 * const batch = {
 *   inputs: new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]),
 *   shape: [4, 2],
 *   targets: new Float32Array([10, 11, 12, 13]),
 * };
 * const [a, b] = shardBatch(batch, 2);
 * assert.deepEqual([a.shape, [...a.inputs], [...a.targets]], [[2, 2], [0, 1, 2, 3], [10, 11]]);
 * assert.deepEqual([b.shape, [...b.inputs], [...b.targets]], [[2, 2], [4, 5, 6, 7], [12, 13]]);
 * assert.throws(() => shardBatch(batch, 3), RangeError); // 4 rows in 3 equal shards
 * ```
 */
export function shardBatch(batch: TrainingBatch, replicas: number): TrainingBatch[] {
  if (!Number.isInteger(replicas) || replicas < 1) {
    throw new RangeError(
      `shardBatch: replicas must be a positive integer, got ${describeValue(replicas)}`,
    );
  }
  if (batch === null || typeof batch !== "object") {
    throw new TypeError(
      `shardBatch: batch must be an object { inputs, shape, targets }, got ${describeValue(batch)}`,
    );
  }
  const shape = batch.shape;
  if (
    !Array.isArray(shape) || shape.length === 0 ||
    shape.some((d) => !Number.isInteger(d) || d < 1)
  ) {
    throw new RangeError(
      `shardBatch: batch.shape must be a non-empty array of positive integers, got ${
        Array.isArray(shape) ? formatShape(shape) : describeValue(shape)
      }`,
    );
  }
  const rows = shape[0];
  const size = shape.reduce((a, d) => a * d, 1);
  if (!(batch.inputs instanceof Float32Array) || batch.inputs.length !== size) {
    throw new RangeError(
      `shardBatch: batch.inputs must be a Float32Array of ${size} values for shape ${
        formatShape(shape)
      }, got ${describeData(batch.inputs)}`,
    );
  }
  const targets = batch.targets;
  if (!(targets instanceof Float32Array) || targets.length === 0 || targets.length % rows !== 0) {
    throw new RangeError(
      `shardBatch: batch.targets must be a Float32Array of a positive multiple of the ${rows} ` +
        `rows, got ${describeData(targets)}`,
    );
  }
  if (batch.microBatchSizes !== undefined) {
    throw new RangeError(
      `shardBatch: batch.microBatchSizes [${
        [...batch.microBatchSizes].join(", ")
      }] split the whole batch, not a shard: leave them out and each replica's schedule ` +
        "splits its own shard",
    );
  }
  if (rows % replicas !== 0) {
    throw new RangeError(
      `shardBatch: a batch of ${rows} rows (dim 0) cannot be split into ${replicas} equal ` +
        `shards: the rows must be a multiple of ${replicas}`,
    );
  }
  const r = rows / replicas;
  const inRow = size / rows, tRow = targets.length / rows;
  const shardShape = [r, ...shape.slice(1)];
  return Array.from({ length: replicas }, (_, k) => ({
    inputs: batch.inputs.slice(k * r * inRow, (k + 1) * r * inRow),
    shape: [...shardShape],
    targets: targets.slice(k * r * tRow, (k + 1) * r * tRow),
  }));
}
