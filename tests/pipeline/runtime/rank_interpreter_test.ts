import assert from "node:assert/strict";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import type { Schedule } from "../../../src/pipeline/schedule/schedule.ts";
import { runRank } from "../../../src/pipeline/runtime/rank_interpreter.ts";
import { runPipelineInProcess } from "../../../src/pipeline/runtime/in_process_rank_group.ts";
import { createSyntheticExecutor } from "../../../src/pipeline/testing/synthetic_executor.ts";
import { PipelineRankError } from "../../../src/pipeline/runtime/pipeline_rank_error.ts";
import { ScheduleDeadlockError } from "../../../src/pipeline/analysis/validate.ts";
import type {
  RankExecutor,
  StageContext,
  StageOutput,
} from "../../../src/pipeline/runtime/rank_executor.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import { formatAction } from "../../../src/pipeline/schedule/action.ts";
import { WebGPUBackend } from "../../../src/tensor/webgpu/mod.ts";
import * as ops from "../../../src/tensor/ops.ts";
import { assertFollowsSchedule } from "./_timeline_checks.ts";
import {
  type AffineCalls,
  createRankExecutor as affine,
  referenceTraining,
} from "./_affine_executor.ts";
import { deadlocked2x2 } from "../_hand_schedules.ts";

function schedulesFor(p: number, m: number): Schedule[] {
  const out: Schedule[] = [];
  for (const name of SCHEDULE_NAMES) {
    try {
      out.push(generateSchedule(name, { ranks: p, microBatches: m }));
    } catch (e) {
      if (!(e instanceof RangeError)) throw e; // a (p, m) this schedule does not take
    }
  }
  return out;
}

Deno.test("runPipelineInProcess: every schedule at P = 1..4 follows its lists and dependencies", async () => {
  let runs = 0;
  for (let p = 1; p <= 4; p++) {
    for (const schedule of schedulesFor(p, 2 * p)) {
      const r = await runPipelineInProcess(schedule, {
        createExecutor: createSyntheticExecutor,
        executorOptions: { ms: 0 },
        iterations: 2,
      });
      assertFollowsSchedule(schedule, r.events, 2);
      assert.equal(r.iterations, 2);
      runs++;
    }
  }
  assert.ok(runs >= 30, `ran ${runs} schedule/P combinations`);
});

Deno.test("runPipelineInProcess: a plugged-in executor trains exactly as the plain computation", async () => {
  const weights = [0.9, 1.1, 0.8, 1.2];
  const lr = 0.01;
  const batches = [0, 1, 2].map((it) =>
    Array.from({ length: 4 }, (_, mb) => [it + 1, mb + 1, 0.5, -1])
  );
  const want = referenceTraining(weights, lr, batches);
  for (const name of ["1f1b", "zb-h1", "zb-v"]) {
    const schedule = generateSchedule(name, { ranks: name === "zb-v" ? 2 : 4, microBatches: 4 });
    const executors: RankExecutor<AffineCalls>[] = [];
    const r = await runPipelineInProcess<AffineCalls>(schedule, {
      createExecutor: (init) => {
        const ex = affine(init);
        const begin = ex.beginIteration!;
        ex.beginIteration = (it, _payload) => begin(it, init.rank === 0 ? batches[it] : undefined);
        executors.push(ex);
        return ex;
      },
      executorOptions: { weights, lr },
      iterations: 3,
    });
    const got: Record<string, number> = Object.assign(
      {},
      ...await Promise.all(executors.map((ex) => ex.calls!.weights(null))),
    );
    want.weights.forEach((w, s) =>
      assert.ok(Math.abs(got[s] - w) <= 1e-5 * Math.abs(w), `${name}: w[${s}] ${got[s]} vs ${w}`)
    );
    const lastRank = schedule.stageToRank[schedule.stageToRank.length - 1];
    const losses = r.reports[lastRank].map((x) => (x as { loss: number }).loss);
    for (let i = 0; i < 3; i++) {
      assert.ok(
        Math.abs(losses[i] - want.losses[i]) <= 1e-5 * Math.abs(want.losses[i]),
        `${name}: loss ${i} ${losses[i]} vs ${want.losses[i]}`,
      );
    }
  }
});

Deno.test("runPipelineInProcess: a forward-only run keeps the forwards' order and steps nothing", async () => {
  for (const name of ["1f1b", "zb-v", "interleaved-1f1b"]) {
    const schedule = generateSchedule(name, { ranks: 2, microBatches: 4 });
    let steps = 0;
    const r = await runPipelineInProcess(schedule, {
      createExecutor: (init) => {
        const ex = createSyntheticExecutor(init);
        ex.step = () => {
          steps++;
        };
        return ex;
      },
      executorOptions: { ms: 0 },
      forwardOnly: true,
    });
    assertFollowsSchedule(schedule, r.events, 1, 0, true);
    assert.equal(steps, 0);
  }
});

Deno.test("runPipelineInProcess: an executor error names rank, action and iteration", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 3, microBatches: 4 });
  await assert.rejects(
    runPipelineInProcess(schedule, {
      createExecutor: createSyntheticExecutor,
      executorOptions: { ms: 0 },
      policy: { faultInjection: { failAt: "1F2", iteration: 1 } },
      iterations: 2,
    }),
    (e: Error) =>
      e instanceof PipelineRankError && e.rank === 1 &&
      e.message === "rank 1 failed in 1F2 (stage 1, microBatch 2, iteration 1): " +
          "injected failure at 1F2",
  );
});

Deno.test("runPipelineInProcess: a deadlocking schedule is refused before any work", async () => {
  const schedule = deadlocked2x2();
  let built = 0;
  await assert.rejects(
    runPipelineInProcess(schedule, {
      createExecutor: (init) => {
        built++;
        return createSyntheticExecutor(init);
      },
    }),
    (e: Error) => e instanceof ScheduleDeadlockError && e.stalls.some((s) => s.rank === 1),
  );
  assert.equal(built, 0, "no executor was built");
});

Deno.test("runRank: with deviceDone, an event starts at max(call, previous device end) and ends when its work is done, and the next action does not wait", async () => {
  const schedule = generateSchedule("gpipe", { ranks: 1, microBatches: 3 });
  const [comm] = InProcessBackend.createGroup(1);
  let now = 0;
  const resolvers: (() => void)[] = [];
  const executor: RankExecutor = {
    forward: () => {
      now += 1; // recording takes one unit of host time
      return null;
    },
    backward: () => null,
    backwardInput: () => null,
    backwardWeight: () => {},
    step: () => {},
    deviceDone: () => new Promise<void>((resolve) => resolvers.push(resolve)),
  };
  const run = runRank({ schedule, rank: 0, comm, executor, clock: () => now, forwardOnly: true });
  for (let i = 0; i < 10 && resolvers.length < 3; i++) {
    await new Promise((r) => setTimeout(r, 0));
  }
  assert.equal(resolvers.length, 3, "all three forwards were called before any device work ended");
  for (const [i, t] of [[0, 100], [1, 130], [2, 131]]) {
    now = t;
    resolvers[i]();
    await new Promise((r) => setTimeout(r, 0));
  }
  const { events } = await run;
  comm.close();
  assert.deepEqual(events.map((e) => [e.start, e.end]), [[0, 100], [100, 130], [130, 131]]);
});

Deno.test("runRank: a rejected deviceDone fails the run naming rank and action", async () => {
  const schedule = generateSchedule("gpipe", { ranks: 1, microBatches: 2 });
  const [comm] = InProcessBackend.createGroup(1);
  const executor: RankExecutor = {
    forward: () => null,
    backward: () => null,
    backwardInput: () => null,
    backwardWeight: () => {},
    step: () => {},
    deviceDone: () => Promise.reject(new Error("device lost")),
  };
  await assert.rejects(
    runRank({ schedule, rank: 0, comm, executor }),
    (e: Error) => e instanceof PipelineRankError && e.rank === 0 && /device lost/.test(e.message),
  );
  comm.close();
});

// WebGPU where an adapter exists, unless the run asks for the CPU alone.
const hasGpu = Deno.env.get("CONVEYOR_TEST_BACKENDS") !== "cpu" &&
  (await navigator.gpu?.requestAdapter().catch(() => null)) != null;

if (hasGpu) {
  Deno.test("runPipelineInProcess: on WebGPU, events dated by device timestamps end after their call and no later than their output's read-back; lanes never overlap", async () => {
    const n = 384;
    const data = new Float32Array(n * n).map((_, i) => ((i * 7919) % 1000) / 1000 - 0.5);
    const backends: WebGPUBackend[] = [];
    // When each action was called, and when it had its output's data in hand.
    const calledAt = new Map<string, number>();
    const readAt = new Map<string, number>();
    const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 3 });
    let expected: Float32Array | null = null;
    try {
      const r = await runPipelineInProcess(schedule, {
        createExecutor: async () => {
          const be = await WebGPUBackend.create({ matmul: "default" });
          backends.push(be);
          const a = be.fromData(data, [n, n]);
          let marks: [Promise<number> | undefined, Promise<number> | undefined] = [
            undefined,
            undefined,
          ];
          // As the model's executor: marks around the kernels, the end one
          // before the read-back, which has the data within the call.
          const work = (ctx: StageContext): StageOutput => {
            const key = `${ctx.iteration}:${formatAction(ctx.action)}`;
            calledAt.set(key, performance.now());
            const start = be.timeMark();
            const c = ops.matmul(ops.matmul(a, a), a);
            marks = [start, be.timeMark()];
            const d = c.tryToArraySync() ?? assert.fail("WebGPU reads within the call here");
            readAt.set(key, performance.now());
            c.dispose();
            expected ??= d.slice();
            assert.deepEqual(d, expected, "every action computes the same product");
            return d;
          };
          return {
            forward: work,
            backward: work,
            backwardInput: work,
            backwardWeight: () => {},
            step: () => {},
            deviceDone: () => {
              const [start, end] = marks;
              marks = [undefined, undefined];
              if (start === undefined || end === undefined) return be.sync();
              return Promise.all([start, end]).then(([s, e]) => ({
                start: s,
                end: e,
                hostMinusDevice: () => be.hostMinusDevice(),
              }));
            },
            // The marks are read once a later read-back or sync drained the queue.
            endIteration: () => be.sync(),
            dispose: () => a.dispose(),
          };
        },
      });
      assert.equal(r.events.length, 12);
      assertFollowsSchedule(schedule, r.events);
      for (const e of r.events) {
        const key = `${e.iteration}:${formatAction(e.action)}`;
        const called = calledAt.get(key)!;
        const read = readAt.get(key)!;
        const [start, end] = [e.start + r.startTime, e.end + r.startTime];
        assert.ok(
          end <= read,
          `${key} ends at ${end}, after its read-back had the data at ${read}`,
        );
        assert.ok(end >= called && end > start, `${key}: [${start}, ${end}], called at ${called}`);
      }
    } finally {
      for (const be of backends) await be.close();
    }
  });
}

Deno.test("runPipelineInProcess: when one rank's createExecutor fails, the others' executors are disposed", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 3, microBatches: 2 });
  for (const sync of [false, true]) {
    const disposed: number[] = [];
    await assert.rejects(
      runPipelineInProcess(schedule, {
        createExecutor: (init) => {
          if (init.rank === 1) {
            if (sync) throw new Error("no device for rank 1");
            return Promise.reject(new Error("no device for rank 1"));
          }
          const ex = createSyntheticExecutor(init);
          ex.dispose = () => void disposed.push(init.rank);
          return ex;
        },
        executorOptions: { ms: 0 },
      }),
      /no device for rank 1/,
    );
    assert.deepEqual(disposed.sort(), [0, 2]);
  }
});

Deno.test("runPipelineInProcess: a failed run still disposes every executor and throws the first error", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 3, microBatches: 2 });
  const disposed: number[] = [];
  await assert.rejects(
    runPipelineInProcess(schedule, {
      createExecutor: (init) => {
        const ex = createSyntheticExecutor(init);
        const dispose = ex.dispose?.bind(ex);
        ex.dispose = async () => {
          await dispose?.();
          disposed.push(init.rank);
        };
        return ex;
      },
      executorOptions: { ms: 0 },
      policy: { faultInjection: { failAt: "2F1" } },
    }),
    (e: Error) => e instanceof PipelineRankError && e.rank === 2,
  );
  assert.deepEqual(disposed.sort(), [0, 1, 2]);
});

Deno.test("runRank: onState's index is the action's position in schedule.actions[rank], in a forward-only run too", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 1, microBatches: 3 });
  for (const forwardOnly of [false, true]) {
    const [comm] = InProcessBackend.createGroup(1);
    const executor = createSyntheticExecutor({
      rank: 0,
      ranks: 1,
      stages: [0],
      numStages: 1,
      microBatches: 3,
      options: { ms: 0 },
      abortFlag: new Int32Array(1),
      signal: new AbortController().signal,
      comm,
    });
    const computed: string[] = [];
    let done = -1;
    await runRank({
      schedule,
      rank: 0,
      comm,
      executor,
      forwardOnly,
      onState: (state, index) => {
        if (state === "compute") computed.push(formatAction(schedule.actions[0][index]));
        if (state === "done") done = index;
      },
    });
    const want = schedule.actions[0].filter((a) => !forwardOnly || a.kind === "F").map(
      formatAction,
    );
    assert.deepEqual(computed, want, `forwardOnly ${forwardOnly}`);
    assert.equal(done, schedule.actions[0].length);
    comm.close();
  }
});
