// Training batches under MPI (SPMD): every process calls `train` with as
// many batches, and either has them (its own split) or passes null for each
// (rank 0 then sends the process what its rank needs). Elsewhere every
// batch is required.

import type { RankGroupKind } from "../runtime/rank_group.ts";
import type { ModelStagePayload } from "./model_stage_executor.ts";
import { type BatchLayout, describeArray, splitBatch, type TrainingBatch } from "./batch.ts";

/**
 * Each batch's per-rank payloads, or null where this process has no
 * batches (all null: allowed only on an MPI rank other than 0). Throws a
 * TypeError/RangeError naming the batch before any work; `o.checkUsable`
 * runs once the array itself is checked, before the batches are.
 */
export function localPlans(
  layout: BatchLayout,
  batches: readonly (TrainingBatch | null)[],
  o: {
    /** The model's rank group. */
    readonly kind: RankGroupKind;
    /** Its local rank (MPI). */
    readonly localRank: number | undefined;
    /** The step index of the first batch over the model's life. */
    readonly firstStep: number;
    /** Throws if the model cannot take a call now. */
    readonly checkUsable: () => void;
  },
): ModelStagePayload[][] | null {
  if (!Array.isArray(batches) || batches.length === 0) {
    throw new RangeError(
      `batches must be a non-empty array of batches, got ${
        Array.isArray(batches) ? "an empty array" : describeArray(batches)
      }`,
    );
  }
  o.checkUsable();
  const missing = batches.filter((b) => b === null || b === undefined).length;
  const name = (i: number) => batches.length > 1 ? `batches[${i}]` : "batch";
  if (missing === 0) {
    return batches.map((b, i) => splitBatch(layout, b!, name(i), o.firstStep + i));
  }
  if (o.kind !== "mpi") {
    const i = batches.findIndex((b) => b === null || b === undefined);
    throw new TypeError(
      `${name(i)} must be an object { inputs, shape, targets }, got ${batches[i]} ` +
        `(a null batch, sent by rank 0, needs rankGroup "mpi")`,
    );
  }
  if (missing !== batches.length) {
    throw new TypeError(
      `batches holds ${missing} null of ${batches.length}: give every batch, or (on MPI ranks ` +
        "other than 0) none",
    );
  }
  if (o.localRank === 0) {
    throw new TypeError(
      "rank 0 has no batch: rank 0 sends the other ranks theirs, so it needs every batch " +
        "(give null only on the other ranks)",
    );
  }
  return null;
}
