// An executor module: the synthetic executor, answering one call,
// `tryWrite(path)`, that writes a file from inside the rank and says
// "wrote" or the error it met.

import type {
  RankExecutor,
  RankExecutorInit,
} from "../../../src/pipeline/runtime/rank_executor.ts";
import { createSyntheticExecutor } from "../../../src/pipeline/testing/synthetic_executor.ts";

export type ProbeCalls = { tryWrite: { args: string; result: string } };

export function createRankExecutor(init: RankExecutorInit): RankExecutor<ProbeCalls> {
  const inner = createSyntheticExecutor(init);
  return {
    forward: (ctx, input) => inner.forward(ctx, input),
    backward: (ctx, grad) => inner.backward(ctx, grad),
    backwardInput: (ctx, grad) => inner.backwardInput(ctx, grad),
    backwardWeight: (ctx) => inner.backwardWeight(ctx),
    step: (stage, iteration) => inner.step(stage, iteration),
    calls: {
      tryWrite(path: string): string {
        try {
          Deno.writeTextFileSync(path, `rank ${init.rank}`);
          return "wrote";
        } catch (e) {
          return `${(e as Error).name}: ${(e as Error).message}`;
        }
      },
    },
  };
}
