// Post-validation of optimizer steps: a step any stage finds non-finite is
// rolled back on every stage, and an iteration begun on its weights runs
// again, so the result equals training that skipped that step; with every
// check finite the result is plain training. Against a reference computed
// in f64, one stage after another.

import assert from "node:assert/strict";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { InProcessRankGroup } from "../../../src/pipeline/runtime/in_process_rank_group.ts";
import { WorkerRankGroup } from "../../../src/pipeline/runtime/worker_rank_group.ts";
import type { RankGroup } from "../../../src/pipeline/runtime/rank_group.ts";
import {
  type AffineCalls,
  type AffineOptions,
  createRankExecutor as affine,
  near,
  referenceTraining,
} from "./_affine_executor.ts";

const AFFINE = new URL("./_affine_executor.ts", import.meta.url).href;
const LR = 0.01;
const batches = [0, 1, 2, 3].map((it) =>
  Array.from({ length: 4 }, (_, mb) => [it + 1, mb + 1, 0.5, -1])
);

async function train(
  group: RankGroup<AffineCalls>,
  iterations: number,
): Promise<{ weights: number[]; losses: number[]; rolledBack: number[] }> {
  const r = await group.run({
    iterations,
    payload: (rank, i) => rank === 0 ? batches[i] : undefined,
  });
  const got: Record<string, number> = {};
  for (let rank = 0; rank < group.ranks; rank++) {
    Object.assign(got, await group.call(rank, "weights", null));
  }
  const last = group.schedule.stageToRank[group.schedule.stageToRank.length - 1];
  return {
    weights: Object.keys(got).sort((a, b) => +a - +b).map((k) => got[k]),
    losses: r.reports[last].map((x) => (x as { loss: number }).loss),
    rolledBack: r.rolledBack.map((x) => x.iteration),
  };
}

Deno.test("post-validation (in-process): a NaN at any stage skips that step everywhere, for every schedule", async () => {
  for (const name of SCHEDULE_NAMES) {
    const p = name === "dualpipe-v" ? 2 : 2;
    const schedule = generateSchedule(name, { ranks: p, microBatches: 4 });
    const numStages = schedule.stageToRank.length;
    const init = Array.from({ length: numStages }, (_, s) => 0.9 + 0.1 * s);
    for (let bad = 0; bad < numStages; bad++) {
      const options: AffineOptions = {
        weights: init,
        lr: LR,
        poison: { iteration: 1, stage: bad },
      };
      const group = await InProcessRankGroup.create<AffineCalls>({
        schedule,
        createExecutor: affine,
        executorOptions: options,
        policy: { nonFinite: "skip" },
      });
      try {
        const got = await train(group, 3);
        const want = referenceTraining(init, LR, batches.slice(0, 3), new Set([1]));
        near(got.weights, want.weights, `${name} NaN at stage ${bad}: weights`);
        near(got.losses, want.losses, `${name} NaN at stage ${bad}: losses`);
        assert.deepEqual(got.rolledBack, [1], `${name}: rolled back`);
      } finally {
        await group.dispose();
      }
    }
  }
});

Deno.test("post-validation (in-process): all finite trains as plain SGD; a bad last step is rolled back at the run's end", async () => {
  const schedule = generateSchedule("zb-h2", { ranks: 4, microBatches: 4 });
  const init = [0.9, 1.1, 0.8, 1.2];
  for (const poison of [undefined, { iteration: 2, stage: 3 }]) {
    const group = await InProcessRankGroup.create<AffineCalls>({
      schedule,
      createExecutor: affine,
      executorOptions: { weights: init, lr: LR, ...(poison ? { poison } : {}) },
      policy: { nonFinite: "skip" },
    });
    try {
      const got = await train(group, 3);
      const want = referenceTraining(init, LR, batches.slice(0, 3), new Set(poison ? [2] : []));
      near(got.weights, want.weights, "weights");
      near(got.losses, want.losses, "losses");
      assert.deepEqual(got.rolledBack, poison ? [2] : []);
      // The group goes on from the restored weights.
      const more = await train(group, 1);
      assert.equal(more.rolledBack.length, 0);
    } finally {
      await group.dispose();
    }
  }
});

Deno.test('post-validation (in-process): "throw" rolls the bad step back and ends the run there', async () => {
  const schedule = generateSchedule("1f1b", { ranks: 3, microBatches: 4 });
  const init = [0.9, 1.1, 0.8];
  const group = await InProcessRankGroup.create<AffineCalls>({
    schedule,
    createExecutor: affine,
    executorOptions: { weights: init, lr: LR, poison: { iteration: 1, stage: 0 } },
    policy: { nonFinite: "throw" },
  });
  try {
    const got = await train(group, 4);
    const want = referenceTraining(init, LR, batches.slice(0, 2), new Set([1]));
    near(got.weights, want.weights, "weights");
    assert.equal(got.losses.length, 2, "iterations 0 and 1 report; none after the bad step");
    assert.deepEqual(got.rolledBack, [1]);
  } finally {
    await group.dispose();
  }
});

Deno.test("post-validation (workers): a NaN at a middle stage is rolled back, the iteration after it replayed", async () => {
  for (const name of ["zb-h2", "zb-v", "interleaved-1f1b"]) {
    const schedule = generateSchedule(name, { ranks: 2, microBatches: 4 });
    const numStages = schedule.stageToRank.length;
    const init = Array.from({ length: numStages }, (_, s) => 1.1 - 0.05 * s);
    const group = await WorkerRankGroup.create<AffineCalls>({
      schedule,
      executor: {
        module: AFFINE,
        options: { weights: init, lr: LR, poison: { iteration: 1, stage: 1 } },
      },
      policy: { nonFinite: "skip" },
    });
    try {
      const got = await train(group, 4);
      const want = referenceTraining(init, LR, batches, new Set([1]));
      near(got.weights, want.weights, `${name}: weights`);
      near(got.losses, want.losses, `${name}: losses`);
      assert.deepEqual(got.rolledBack, [1]);
    } finally {
      await group.dispose();
    }
    assert.equal(liveWorkers(), 0);
  }
});
