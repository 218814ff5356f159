// An executor module whose factory never settles: the pool's startup timeout must catch it.

import type { StageExecutor } from "../../../src/pipeline/runtime/stage_executor.ts";

export function createStageExecutor(): Promise<StageExecutor> {
  return new Promise<StageExecutor>(() => {});
}
