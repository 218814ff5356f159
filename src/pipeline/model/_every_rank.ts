/**
 * One typed call sent to every rank of a model's group at once.
 *
 * @module
 */

import type { RankGroup } from "../runtime/rank_group.ts";
import type { ModelStageCalls } from "./stage_calls.ts";

/** Sends `method` with `args` to every rank; resolves with the results in rank order. */
export function callEveryRank<K extends keyof ModelStageCalls & string>(
  group: RankGroup<ModelStageCalls>,
  method: K,
  args: ModelStageCalls[K]["args"],
): Promise<ModelStageCalls[K]["result"][]> {
  return Promise.all(Array.from({ length: group.ranks }, (_, r) => group.call(r, method, args)));
}

/**
 * Sends `method` (a save) to every rank and resolves with pipeline ranks
 * 0 … P−1's files (replica 0's), after checking that every replica's rank
 * p gave the same bytes as replica 0's (data parallelism: the replicas
 * never diverge; an Error naming the replica and rank otherwise).
 */
export async function callReplicasAgreeing(
  group: RankGroup<ModelStageCalls>,
  method: "save" | "saveState",
): Promise<Uint8Array[]> {
  return replicasAgreeing(group, method, await callEveryRank(group, method, null));
}

/**
 * Pipeline ranks 0 … P−1's files of `all` (every rank's answer to
 * `method`), after checking that every replica's rank p gave the same bytes
 * as replica 0's (see {@linkcode callReplicasAgreeing}).
 */
export function replicasAgreeing(
  group: RankGroup<ModelStageCalls>,
  method: "save" | "saveState",
  all: readonly Uint8Array[],
): Uint8Array[] {
  const P = group.ranks / (group.replicas ?? 1);
  for (let g = P; g < all.length; g++) {
    const a = all[g], b = all[g % P];
    let same = a.length === b.length;
    for (let i = 0; same && i < a.length; i++) same = a[i] === b[i];
    if (!same) {
      throw new Error(
        `replica ${Math.floor(g / P)}'s pipeline rank ${g % P} (rank ${g}) holds other ${
          method === "save" ? "weights" : "training state"
        } than replica 0's: the replicas diverged`,
      );
    }
  }
  return all.slice(0, P);
}
