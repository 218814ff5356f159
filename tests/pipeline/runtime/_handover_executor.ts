// An executor module for the hand-over ordering test: every action computes
// synchronously (a busy loop, no awaits). Before its own work, each action
// marks its own input as received, then spins until every output this rank
// handed over earlier has reached its consumer (marked likewise in a
// SharedArrayBuffer by the consumer's executor when it is called), for at
// most `capMs`; it then records whether that happened in time. A runtime
// that holds an output back until the next action ends makes every such
// spin run into the cap, so the test needs no clock to tell.
//
// Shared layout (Int32Array over `options.shared`): [space · m + mb] is 1
// once the consumer has received that output (space 0 activations, 1
// gradients); [2m + slot] counts outcomes: slot 0 in time, slot 1 missed.

import type {
  RankExecutor,
  RankExecutorInit,
  StageContext,
  StageOutput,
} from "../../../src/pipeline/runtime/rank_executor.ts";

export interface HandoverOptions {
  readonly shared: SharedArrayBuffer;
  /** How outputs are returned: ready arrays, or promises already resolved. */
  readonly output: "array" | "promise";
  readonly capMs: number;
}

export function createRankExecutor(init: RankExecutorInit): RankExecutor {
  const o = init.options as HandoverOptions;
  const m = init.microBatches;
  const flags = new Int32Array(o.shared);
  const sent: number[] = []; // flag indices of this rank's outputs so far
  let missed = false;
  let sink = 0;
  const waitForConsumers = () => {
    if (sent.length === 0) return;
    const until = performance.now() + (missed ? 0 : o.capMs);
    // Busy work: the thread never yields while it waits.
    while (!sent.every((i) => Atomics.load(flags, i) === 1) && performance.now() < until) {
      for (let k = 0; k < 1000; k++) sink = (sink + Math.sqrt(sink + k)) % 1e6;
    }
    const ok = sent.every((i) => Atomics.load(flags, i) === 1);
    if (!ok) missed = true;
    Atomics.add(flags, 2 * m + (ok ? 0 : 1), 1);
    sent.length = 0;
  };
  const received = (space: number, mb: number) => Atomics.store(flags, space * m + mb, 1);
  const out = (space: number, ctx: StageContext, last: boolean): StageOutput => {
    if (last) return null;
    sent.push(space * m + ctx.action.microBatch);
    const data = new Float32Array([ctx.action.microBatch]);
    return o.output === "array" ? data : { pending: Promise.resolve(data) };
  };
  const backward = (ctx: StageContext, grad: Float32Array | null): StageOutput => {
    if (grad !== null) received(1, ctx.action.microBatch);
    waitForConsumers();
    return out(1, ctx, ctx.isFirstStage);
  };
  return {
    forward(ctx, input) {
      if (input !== null) received(0, ctx.action.microBatch);
      waitForConsumers();
      return out(0, ctx, ctx.isLastStage);
    },
    backward,
    backwardInput: backward,
    backwardWeight() {
      waitForConsumers();
    },
    step() {},
  };
}
