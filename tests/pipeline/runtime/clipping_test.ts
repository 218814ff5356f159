// Global-norm clipping by post-validation (the run policy's clipGradNorm): every stage
// steps unclipped at once and publishes its sum of squares; a norm above the
// limit redoes every stage's step clipped and replays the iteration begun on
// the unclipped weights, so the result equals training clipped before each
// step. Against the affine reference computed in f64; and, clock-free, that
// no rank waits for the others' gradients before it steps.

import assert from "node:assert/strict";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import {
  InProcessRankGroup,
  runPipelineInProcess,
} from "../../../src/pipeline/runtime/in_process_rank_group.ts";
import { WorkerRankGroup } from "../../../src/pipeline/runtime/worker_rank_group.ts";
import type { RankGroup } from "../../../src/pipeline/runtime/rank_group.ts";
import { runRank } from "../../../src/pipeline/runtime/rank_interpreter.ts";
import type {
  RankExecutor,
  RankExecutorInit,
  StageContext,
} from "../../../src/pipeline/runtime/rank_executor.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import {
  type AffineCalls,
  createRankExecutor as affine,
  near,
  referenceTraining,
} from "./_affine_executor.ts";

const AFFINE = new URL("./_affine_executor.ts", import.meta.url).href;
const LR = 0.01;
const batches = [0, 1, 2, 3].map((it) =>
  Array.from({ length: 4 }, (_, mb) => [it + 1, mb + 1, 0.5, -1])
);

interface Trained {
  weights: number[];
  losses: number[];
  norms: number[];
  clipped: boolean[];
  rolledBack: number[];
}

async function train(group: RankGroup<AffineCalls>, iterations: number): Promise<Trained> {
  const r = await group.run({
    iterations,
    payload: (rank, i) => rank === 0 ? batches[i] : undefined,
  });
  const got: Record<string, number> = {};
  for (let rank = 0; rank < group.ranks; rank++) {
    Object.assign(got, await group.call(rank, "weights", null));
  }
  const last = group.schedule.stageToRank[group.schedule.stageToRank.length - 1];
  assert.deepEqual(
    r.gradNorms.map((n) => n.iteration),
    Array.from({ length: iterations }, (_, i) => r.firstIteration + i),
    "one norm per iteration",
  );
  return {
    weights: Object.keys(got).sort((a, b) => +a - +b).map((k) => got[k]),
    losses: r.reports[last].map((x) => (x as { loss: number }).loss),
    norms: r.gradNorms.map((n) => n.norm),
    clipped: r.gradNorms.map((n) => n.clipped),
    rolledBack: r.rolledBack.map((x) => x.iteration),
  };
}

function initFor(numStages: number): number[] {
  return Array.from({ length: numStages }, (_, s) => 1.1 - 0.05 * s);
}

Deno.test("clipping (in-process, P = 2): every step clipped equals clipped f64 training, for every schedule, with and without the non-finite check", async () => {
  for (const name of SCHEDULE_NAMES) {
    const schedule = generateSchedule(name, { ranks: 2, microBatches: 4 });
    const init = initFor(schedule.stageToRank.length);
    const want = referenceTraining(init, LR, batches, new Set(), 1);
    assert.ok(want.norms.every((n) => n > 1), `${name}: clipping is active: ${want.norms}`);
    for (const nonFinite of ["off", "skip"] as const) {
      const group = await InProcessRankGroup.create<AffineCalls>({
        schedule,
        createExecutor: affine,
        executorOptions: { weights: init, lr: LR },
        policy: { nonFinite, clipGradNorm: 1 },
      });
      try {
        const got = await train(group, 4);
        const what = `${name}, nonFinite ${nonFinite}`;
        near(got.weights, want.weights, `${what}: weights`);
        near(got.losses, want.losses, `${what}: losses`);
        near(got.norms, want.norms, `${what}: norms`);
        assert.deepEqual(got.clipped, [true, true, true, true], `${what}: clipped`);
        assert.deepEqual(got.rolledBack, [], `${what}: a clip is not a skipped step`);
      } finally {
        await group.dispose();
      }
    }
  }
});

Deno.test("clipping (in-process, P = 4): some steps clipped, a NaN step rolled back, the rest committed", async () => {
  const schedule = generateSchedule("zb-h2", { ranks: 4, microBatches: 4 });
  const init = initFor(4);
  const free = referenceTraining(init, LR, batches);
  // Between the norms: the steps above it clip, the others commit.
  const clip = [...free.norms].sort((a, b) => a - b)[1] * 1.01;
  const want = referenceTraining(init, LR, batches, new Set([2]), clip);
  const group = await InProcessRankGroup.create<AffineCalls>({
    schedule,
    createExecutor: affine,
    executorOptions: { weights: init, lr: LR, poison: { iteration: 2, stage: 1 } },
    policy: { nonFinite: "skip", clipGradNorm: clip },
  });
  try {
    const got = await train(group, 4);
    near(got.weights, want.weights, "weights");
    near(got.losses, want.losses, "losses");
    assert.deepEqual(got.rolledBack, [2]);
    assert.ok(Number.isNaN(got.norms[2]), `the NaN step's norm is NaN, got ${got.norms[2]}`);
    near([0, 1, 3].map((i) => got.norms[i]), [0, 1, 3].map((i) => want.norms[i]), "norms");
    const expected = want.norms.map((n, i) => i !== 2 && n > clip);
    assert.deepEqual(got.clipped, expected);
    assert.ok(expected.includes(true) && expected.includes(false), `mixed: ${want.norms}`);
  } finally {
    await group.dispose();
  }
});

Deno.test("clipping (workers): every step clipped equals clipped f64 training (zb-h2, interleaved-1f1b)", async () => {
  for (const name of ["zb-h2", "interleaved-1f1b"]) {
    const schedule = generateSchedule(name, { ranks: 2, microBatches: 4 });
    const init = initFor(schedule.stageToRank.length);
    const group = await WorkerRankGroup.create<AffineCalls>({
      schedule,
      executor: { module: AFFINE, options: { weights: init, lr: LR } },
      policy: { clipGradNorm: 1 },
    });
    try {
      const got = await train(group, 4);
      const want = referenceTraining(init, LR, batches, new Set(), 1);
      near(got.weights, want.weights, `${name}: weights`);
      near(got.losses, want.losses, `${name}: losses`);
      near(got.norms, want.norms, `${name}: norms`);
      assert.deepEqual(got.clipped, [true, true, true, true]);
    } finally {
      await group.dispose();
    }
    assert.equal(liveWorkers(), 0);
  }
});

// Rank 0's last backward of each iteration waits until the last stage has
// stepped that iteration. With a barrier before the steps (the norm summed
// over every rank first), the last stage's step would wait for rank 0's
// sum, sent after that backward: a deadlock. Order is read from one log;
// the timer only turns a deadlock into a failure.
Deno.test("clipping adds no barrier: the last stage steps iteration k before rank 0's last backward of k", async () => {
  for (const name of ["1f1b", "zb-h2", "zb-v", "interleaved-1f1b"]) {
    const schedule = generateSchedule(name, { ranks: 2, microBatches: 4 });
    const numStages = schedule.stageToRank.length;
    const init = initFor(numStages);
    const comms = InProcessBackend.createGroup(2);
    const log: string[] = [];
    const steppedLast = new Map<number, () => void>();
    const gates = [0, 1, 2].map((it) => new Promise<void>((r) => steppedLast.set(it, r)));
    const stage0Last = schedule.actions[0].findLast((a) => a.stage === 0 && a.kind !== "F")!;
    const logged = (rank: number): RankExecutor => {
      const ex = affine({
        rank,
        ranks: 2,
        stages: schedule.stageToRank.flatMap((r, s) => r === rank ? [s] : []),
        numStages,
        microBatches: 4,
        options: { weights: init, lr: LR },
        abortFlag: new Int32Array(1),
        signal: new AbortController().signal,
        comm: comms[rank],
      });
      // Rank 0's last backward of stage 0 runs once the gate of its iteration opens.
      const gated = async <T>(ctx: StageContext, run: () => T | Promise<T>): Promise<T> => {
        if (ctx.action === stage0Last) {
          await gates[ctx.iteration];
          log.push(`r0 lastB i${ctx.iteration}`);
        }
        return await run();
      };
      return {
        ...ex,
        backward: (ctx, dy) => gated(ctx, () => ex.backward(ctx, dy)),
        backwardInput: (ctx, dy) => gated(ctx, () => ex.backwardInput(ctx, dy)),
        backwardWeight: (ctx) => gated(ctx, () => ex.backwardWeight(ctx)),
        step: (stage, it) => {
          const out = ex.step(stage, it);
          if (stage === numStages - 1) {
            log.push(`last stage stepped i${it}`);
            steppedLast.get(it)!();
          }
          return out;
        },
      };
    };
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const results = await Promise.race([
        Promise.all(comms.map((comm, rank) =>
          runRank({
            schedule,
            rank,
            comm,
            executor: logged(rank),
            iterations: 3,
            payloads: rank === 0 ? batches.slice(0, 3) : undefined,
            policy: { clipGradNorm: 1e9 },
          })
        )),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`${name}: deadlock, a barrier before the steps (${log})`)),
            10_000,
          );
        }),
      ]);
      for (const r of results) {
        assert.deepEqual(r.gradNorms.map((n) => n.clipped), [false, false, false], name);
      }
      const want = [0, 1, 2].flatMap((it) => [`last stage stepped i${it}`, `r0 lastB i${it}`]);
      assert.deepEqual(log, want, name);
    } finally {
      clearTimeout(timer);
      for (const c of comms) c.close();
    }
  }
});

Deno.test("clipGradNorm is checked: a bad limit and an executor without redoStep are refused, naming them", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 1, microBatches: 1 });
  const [comm] = InProcessBackend.createGroup(1);
  try {
    const executor: RankExecutor = {
      forward: () => null,
      backward: () => null,
      backwardInput: () => null,
      backwardWeight: () => {},
      step: () => {},
    };
    for (const bad of [0, -1, NaN, Infinity]) {
      await assert.rejects(
        runRank({ schedule, rank: 0, comm, executor, policy: { clipGradNorm: bad } }),
        new RegExp(`clipGradNorm must be a finite positive number, got ${bad}`),
      );
    }
    await assert.rejects(
      runRank({ schedule, rank: 0, comm, executor, policy: { clipGradNorm: 1 } }),
      /clipGradNorm needs an executor with redoStep, got undefined/,
    );
  } finally {
    comm.close();
  }
  await assert.rejects(
    InProcessRankGroup.create({
      schedule,
      createExecutor: affine,
      executorOptions: { weights: [1], lr: LR },
      policy: { clipGradNorm: "1" as unknown as number },
    }),
    /clipGradNorm must be a finite positive number, got 1/,
  );
});

Deno.test("runPipelineInProcess carries the run policy: clipGradNorm clips as the rank group does", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
  const init = initFor(2);
  const want = referenceTraining(init, LR, batches.slice(0, 1), new Set(), 1);
  assert.ok(want.norms[0] > 1, `clipping is active: ${want.norms}`);
  // runPipelineInProcess has no payloads: each executor starts with the first batch.
  const withBatch = (i: RankExecutorInit) => {
    const ex = affine(i);
    ex.beginIteration?.(0, batches[0]);
    return ex;
  };
  const r = await runPipelineInProcess(schedule, {
    createExecutor: withBatch,
    executorOptions: { weights: init, lr: LR },
    policy: { clipGradNorm: 1 },
  });
  // A dropped limit runs unclipped: no norm at all.
  assert.equal(r.gradNorms.length, 1, "one global norm: the run clipped by post-validation");
  near([r.gradNorms[0].norm], [want.norms[0]], "norm");
  assert.equal(r.gradNorms[0].clipped, true);
  const losses = r.reports[1].map((x) => (x as { loss: number }).loss);
  near(losses, want.losses, "loss");
});
