// Training batches under MPI (SPMD): every process calls `train` with as
// many batches, and either has them (its own split) or passes null for each
// (rank 0 then sends the process what its rank needs). Elsewhere every
// batch is required.

import type { RankGroupKind } from "../runtime/rank_group.ts";
import type { ModelStagePayload } from "./model_rank_executor.ts";

/**
 * What a null batch splits into: nothing (rank 0 sends this process its
 * rank's payload), allowed only on an MPI rank other than 0.
 */
export function nullBatch(
  kind: RankGroupKind,
  localRank: number | undefined,
  where: string,
): null {
  if (kind !== "mpi") {
    throw new TypeError(
      `${where} must be an object { inputs, shape, targets }, got null ` +
        `(a null batch, sent by rank 0, needs rankGroup "mpi")`,
    );
  }
  if (localRank === 0) {
    throw new TypeError(
      "rank 0 has no batch: rank 0 sends the other ranks theirs, so it needs every batch " +
        "(give null only on the other ranks)",
    );
  }
  return null;
}

/** A run's payload option from a window's plans: none when every batch was null. */
export function payloadOf(
  plans: readonly (ModelStagePayload[] | null)[],
): { payload?: (rank: number, index: number) => unknown } {
  const nulls = plans.filter((p) => p === null).length;
  if (nulls === plans.length) return {};
  if (nulls > 0) {
    throw new TypeError(
      `batches holds ${nulls} null of ${plans.length}: give every batch, or (on MPI ranks ` +
        "other than 0) none",
    );
  }
  return { payload: (rank, i) => plans[i]![rank] };
}
