// An executor module whose factory never settles: the pool's startup timeout must catch it.

import type { RankExecutor } from "../../../src/pipeline/runtime/rank_executor.ts";

export function createRankExecutor(): Promise<RankExecutor> {
  return new Promise<RankExecutor>(() => {});
}
