// An executor module: the synthetic executor, except that the action named
// by `options.spinAt` (text form, e.g. "1F0") first computes synchronously
// (a busy loop, holding the thread and a core) for `options.spinMs`.

import { formatAction } from "../../../src/pipeline/schedule/action.ts";
import type {
  RankExecutor,
  RankExecutorInit,
  StageContext,
} from "../../../src/pipeline/runtime/rank_executor.ts";
import { createSyntheticExecutor } from "../../../src/pipeline/testing/synthetic_executor.ts";

export function createRankExecutor(init: RankExecutorInit): RankExecutor {
  const { spinAt, spinMs } = init.options as { spinAt: string; spinMs: number };
  const inner = createSyntheticExecutor(init);
  let sink = 0;
  const spin = (ctx: StageContext) => {
    if (formatAction(ctx.action) !== spinAt || ctx.iteration !== 0) return;
    const until = performance.now() + spinMs;
    while (performance.now() < until) sink = (sink + Math.sqrt(sink + 1)) % 1e6;
  };
  return {
    forward: (ctx, input) => (spin(ctx), inner.forward(ctx, input)),
    backward: (ctx, grad) => (spin(ctx), inner.backward(ctx, grad)),
    backwardInput: (ctx, grad) => (spin(ctx), inner.backwardInput(ctx, grad)),
    backwardWeight: (ctx) => (spin(ctx), inner.backwardWeight(ctx)),
    step: (stage, iteration) => inner.step(stage, iteration),
    endIteration: (iteration) => inner.endIteration?.(iteration),
  };
}
