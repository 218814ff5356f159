import assert from "node:assert/strict";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import { ModelRankExecutor } from "../../../src/pipeline/model/model_rank_executor.ts";
import type { StageContext } from "../../../src/pipeline/runtime/rank_executor.ts";
import type { Action } from "../../../src/pipeline/schedule/action.ts";

function ctx(action: Action, numStages: number): StageContext {
  return {
    rank: 0,
    action,
    iteration: 0,
    isFirstStage: action.stage === 0,
    isLastStage: action.stage === numStages - 1,
    forwardOnly: false,
  };
}

Deno.test("ModelRankExecutor (CPU): outputs are ready arrays, handed over before the next action", async () => {
  const cpu = new CpuBackend();
  const net = new Sequential([
    new Linear(cpu, 3, 4, { seed: 1 }),
    new Linear(cpu, 4, 2, { seed: 2 }),
  ]);
  const stageSpecs = [net.slice(0, 1).spec(), net.slice(1, 2).spec()];
  const [comm] = InProcessBackend.createGroup(1);
  // One rank holding both stages, so one executor runs both sides.
  const ex = await ModelRankExecutor.create({
    rank: 0,
    ranks: 1,
    stages: [0, 1],
    numStages: 2,
    microBatches: 1,
    options: { stageSpecs, loss: "mse", optimizer: { kind: "sgd", lr: 0.1 } },
    abortFlag: new Int32Array(1),
    signal: new AbortController().signal,
    comm,
  });
  try {
    ex.beginIteration(0, {
      rows: [2],
      totalRows: 2,
      inputTails: [[3], [4]],
      targetTail: [2],
      inputs: [new Float32Array([1, 2, 3, 4, 5, 6])],
      targets: [new Float32Array([0, 1, 1, 0])],
    });
    const y0 = ex.forward(ctx({ kind: "F", stage: 0, microBatch: 0 }, 2), null);
    assert.ok(y0 instanceof Float32Array, "stage 0's activation is a ready array");
    assert.equal(y0.length, 8);
    assert.equal(ex.forward(ctx({ kind: "F", stage: 1, microBatch: 0 }, 2), y0), null);
    const dx = ex.backwardInput(ctx({ kind: "I", stage: 1, microBatch: 0 }, 2), null);
    assert.ok(dx instanceof Float32Array, "stage 1's input gradient is a ready array");
    assert.equal(dx.length, 8);
    assert.equal(ex.backwardInput(ctx({ kind: "I", stage: 0, microBatch: 0 }, 2), dx), null);
  } finally {
    await ex.dispose();
    comm.close();
    net.dispose();
  }
});

Deno.test("ModelRankExecutor (CPU): dispose closes the rank's backend once, which then refuses work", async () => {
  const cpu = new CpuBackend();
  const net = new Sequential([new Linear(cpu, 3, 2, { seed: 1 })]);
  const [comm] = InProcessBackend.createGroup(1);
  const ex = await ModelRankExecutor.create({
    rank: 0,
    ranks: 1,
    stages: [0],
    numStages: 1,
    microBatches: 1,
    options: { stageSpecs: [net.spec()], loss: "mse", optimizer: { kind: "sgd", lr: 0.1 } },
    abortFlag: new Int32Array(1),
    signal: new AbortController().signal,
    comm,
  });
  const be = ex.backend;
  let closes = 0;
  const close = be.close.bind(be);
  be.close = () => {
    closes++;
    return close();
  };
  assert.equal(be.closed, false);
  await ex.dispose();
  comm.close();
  net.dispose();
  assert.equal(closes, 1, "close() called by the teardown");
  assert.equal(be.closed, true);
  assert.equal(be.memory.liveBytes, 0, "every tensor released before the close");
  assert.throws(() => be.zeros([1]), (e) => e instanceof TypeError && /close\(\)/.test(e.message));
});
