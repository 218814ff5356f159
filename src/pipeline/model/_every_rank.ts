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
