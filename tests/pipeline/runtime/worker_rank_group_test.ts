import assert from "node:assert/strict";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { ScheduleDeadlockError } from "../../../src/pipeline/analysis/validate.ts";
import {
  WorkerRankGroup,
  type WorkerRankGroupOptions,
} from "../../../src/pipeline/runtime/worker_rank_group.ts";
import { PipelineRankError } from "../../../src/pipeline/runtime/pipeline_rank_error.ts";
import {
  SYNTHETIC_EXECUTOR_URL as SYNTH,
  syntheticCosts,
} from "../../../src/pipeline/testing/synthetic_executor.ts";
import { assertFollowsSchedule, CROSS_THREAD_CLOCK_MS as SLACK } from "./_timeline_checks.ts";
import { type AffineCalls, referenceTraining } from "./_affine_executor.ts";
import type { CallMap, NoCalls } from "../../../src/pipeline/runtime/rank_executor.ts";
import { deadlocked2x2 } from "../_hand_schedules.ts";
import { CHANNEL_PREFIX } from "../../../src/pipeline/comm/_envelope.ts";

const AFFINE = new URL("./_affine_executor.ts", import.meta.url).href;
const SPIN = new URL("./_spin_executor.ts", import.meta.url).href;

async function withPool<T, C extends CallMap = NoCalls>(
  options: WorkerRankGroupOptions,
  body: (pool: WorkerRankGroup<C>) => Promise<T>,
): Promise<T> {
  const pool = await WorkerRankGroup.create<C>(options);
  try {
    return await body(pool);
  } finally {
    await pool.dispose();
    assert.equal(liveWorkers(), 0, "every worker ended");
  }
}

/** Runs `body` expecting a failure; returns the error and the time it took. */
async function failure(
  options: WorkerRankGroupOptions,
  iterations = 1,
): Promise<{ error: PipelineRankError; ms: number }> {
  const pool = await WorkerRankGroup.create(options);
  const t = performance.now();
  try {
    await pool.run({ iterations });
  } catch (error) {
    const ms = performance.now() - t;
    assert.ok(error instanceof PipelineRankError, `got ${error}`);
    assert.equal(liveWorkers(), 0, "the failure terminated every worker");
    assert.equal(pool.closed, true);
    await assert.rejects(pool.run(), /the rank group failed and is closed/);
    await pool.dispose();
    return { error, ms };
  }
  await pool.dispose();
  throw new Error("the run did not fail");
}

Deno.test("worker group: 1F1B at P = 2..4 runs every rank's list in order with dependencies kept", async () => {
  for (let p = 2; p <= 4; p++) {
    const schedule = generateSchedule("1f1b", { ranks: p, microBatches: 2 * p });
    await withPool(
      { schedule, executor: { module: SYNTH, options: { ms: 2, sleep: "block" } } },
      async (pool) => {
        assert.equal(liveWorkers(), p);
        const r = await pool.run();
        assertFollowsSchedule(schedule, r.events, 1, 0, false, SLACK);
        const c = syntheticCosts(2);
        for (const e of r.events) {
          assert.ok(e.end - e.start >= c[e.action.kind] - 0.05, `action lasted its set time`);
        }
        // Measured figures are consistent with their definitions.
        const span = Math.max(...r.events.map((e) => e.end)) -
          Math.min(...r.events.map((e) => e.start));
        assert.ok(Math.abs(r.makespan - span) < 1e-9);
        const total = r.busy.reduce((a, b) => a + b, 0);
        assert.ok(Math.abs(r.bubbleFraction - (1 - total / (p * r.makespan))) < 1e-9);
        // Never faster than the simulator allows.
        assert.ok(r.makespan >= simulate(schedule, { costs: c }).makespan - 0.5);
      },
    );
  }
});

Deno.test("worker group: every schedule (multi-stage and V placement included) runs on workers", async () => {
  for (const name of SCHEDULE_NAMES) {
    const schedule = generateSchedule(name, { ranks: 2, microBatches: 4 });
    await withPool({ schedule, executor: { module: SYNTH, options: { ms: 1 } } }, async (pool) => {
      const r = await pool.run({ iterations: 2 });
      assertFollowsSchedule(schedule, r.events, 2, 0, false, SLACK);
    });
  }
});

Deno.test("worker group: iterations run back to back without a barrier, and count on across runs", async () => {
  const schedule = generateSchedule("zb-h2", { ranks: 4, microBatches: 8 });
  // Actions sleep (no CPU), 20 ms each: the simulated overlap of two
  // iterations is 3 actions (60 ms), far above a loaded machine's wake-up lag.
  const ms = 20;
  await withPool(
    { schedule, executor: { module: SYNTH, options: { ms, sleep: "block" } } },
    async (pool) => {
      const r = await pool.run({ iterations: 3 });
      assertFollowsSchedule(schedule, r.events, 3, 0, false, SLACK);
      // Without a barrier the next iteration starts on some rank before the
      // previous one has ended everywhere, as in the simulation: at one of the
      // two boundaries at least (a barrier would prevent both).
      const sim = simulate(schedule, { costs: syntheticCosts(ms), iterations: 3 });
      const overlapAt = (ev: typeof r.events, it: number) =>
        Math.min(...ev.filter((e) => e.iteration === it + 1).map((e) => e.start)) <
          Math.max(...ev.filter((e) => e.iteration === it).map((e) => e.end));
      const overlap = (ev: typeof r.events) => overlapAt(ev, 0) || overlapAt(ev, 1);
      assert.equal(overlapAt(sim.events, 0) && overlapAt(sim.events, 1), true);
      assert.equal(overlap(r.events), true);
      assert.ok(r.steadyStateBubble !== undefined && r.period !== undefined);
      const again = await pool.run({ iterations: 1 });
      assert.equal(again.firstIteration, 3);
      assertFollowsSchedule(schedule, again.events, 1, 3, false, SLACK);
    },
  );
});

Deno.test("worker group: a plugged-in executor module trains exactly as the plain computation", async () => {
  const weights = [0.9, 1.1, 0.8, 1.2];
  const lr = 0.01;
  const batches = [0, 1, 2].map((it) =>
    Array.from({ length: 4 }, (_, mb) => [it + 1, mb + 1, 0.5, -1])
  );
  const want = referenceTraining(weights, lr, batches);
  for (const name of ["zb-h1", "zb-v"]) {
    const schedule = generateSchedule(name, { ranks: name === "zb-v" ? 2 : 4, microBatches: 4 });
    // Each rank gets only its own stages' weights (NaN elsewhere would show).
    const options = (rank: number) => ({
      weights: weights.map((w, s) => schedule.stageToRank[s] === rank ? w : NaN),
      lr,
    });
    await withPool<void, AffineCalls>(
      { schedule, executor: { module: AFFINE, options } },
      async (pool) => {
        const last = schedule.stageToRank[schedule.stageToRank.length - 1];
        // Prediction first: forwards only, no step, the loss of the initial weights.
        const predicted = await pool.run({
          forwardOnly: true,
          payload: (rank) => rank === 0 ? batches[0] : undefined,
        });
        assertFollowsSchedule(schedule, predicted.events, 1, 0, true, SLACK);
        const loss0 = (predicted.reports[last][0] as { loss: number }).loss;
        assert.ok(Math.abs(loss0 - want.losses[0]) <= 1e-5 * Math.abs(want.losses[0]));
        const r = await pool.run({
          iterations: 3,
          payload: (rank, i) => rank === 0 ? batches[i] : undefined,
        });
        r.reports[last].forEach((x, i) => {
          const loss = (x as { loss: number }).loss;
          assert.ok(Math.abs(loss - want.losses[i]) <= 1e-5 * Math.abs(want.losses[i]));
        });
        const got: Record<string, number> = {};
        for (let rank = 0; rank < pool.ranks; rank++) {
          Object.assign(got, await pool.call(rank, "weights", null));
        }
        want.weights.forEach((w, s) =>
          assert.ok(
            Math.abs(got[s] - w) <= 1e-5 * Math.abs(w),
            `${name} w[${s}]: ${got[s]} vs ${w}`,
          )
        );
        await assert.rejects(
          pool.call(1, "nope" as "weights", null),
          /rank 1 failed: call "nope" failed/,
        );
        // A failed call does not bring the pool down.
        await pool.run({ iterations: 1, payload: (rank) => rank === 0 ? batches[0] : undefined });
      },
    );
  }
});

Deno.test("worker group: a worker that throws rejects the step naming rank, stage and action; a new pool works", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 4, microBatches: 8 });
  const { error, ms } = await failure({
    schedule,
    executor: { module: SYNTH, options: { ms: 2 } },
    policy: { faultInjection: { failAt: "2F5" } },
  });
  assert.ok(ms < 10_000, `rejected after ${ms} ms`);
  assert.equal(error.rank, 2);
  assert.equal(error.kind, "error");
  assert.match(
    error.message,
    /^rank 2 failed in 2F5 \(stage 2, microBatch 5, iteration 0\): injected failure at 2F5$/,
  );
  await withPool({ schedule, executor: { module: SYNTH, options: { ms: 1 } } }, async (pool) => {
    assertFollowsSchedule(schedule, (await pool.run()).events, 1, 0, false, SLACK);
  });
});

Deno.test("worker group: a failure in a later iteration names that iteration", async () => {
  const schedule = generateSchedule("zb-h1", { ranks: 3, microBatches: 3 });
  const { error } = await failure({
    schedule,
    executor: { module: SYNTH, options: { ms: 1 } },
    policy: { faultInjection: { failAt: "0W1", iteration: 2 } },
  }, 3);
  assert.match(error.message, /^rank 0 failed in 0W1 \(stage 0, microBatch 1, iteration 2\)/);
});

Deno.test("worker group: a worker that blocks its thread is caught by the heartbeat timeout", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 4, microBatches: 8 });
  const { error, ms } = await failure({
    schedule,
    executor: { module: SYNTH, options: { ms: 2 } },
    heartbeatIntervalMs: 100,
    policy: { faultInjection: { hangAt: "1B3", hang: "block" }, heartbeatMs: 1000 },
  });
  assert.ok(ms < 10_000, `rejected after ${ms} ms`);
  assert.equal(error.kind, "hang");
  assert.match(
    error.message,
    /^rank 1 hung in 1B3 \(stage 1, microBatch 3, iteration 0\): no heartbeat/,
  );
});

Deno.test("worker group: an action computing synchronously past the heartbeat timeout is no hang", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  // Twice the heartbeat timeout; the timeout itself long enough that a
  // spinning thread on a machine loaded many times over (a niced test run at
  // load 10 once got no CPU for 528 ms) still shows CPU use within it.
  const spinMs = 3000;
  await withPool({
    schedule,
    executor: { module: SPIN, options: { ms: 1, spinAt: "1F0", spinMs } },
    heartbeatIntervalMs: 100,
    policy: { heartbeatMs: 1500 },
  }, async (pool) => {
    const r = await pool.run();
    assertFollowsSchedule(schedule, r.events, 1, 0, false, SLACK);
    const spun = r.events.find((e) =>
      e.rank === 1 && e.iteration === r.firstIteration && e.action.kind === "F" &&
      e.action.microBatch === 0
    )!;
    assert.ok(spun.end - spun.start >= spinMs, `1F0 took ${spun.end - spun.start} ms`);
    // The pool is still usable: nothing was declared hung.
    assert.equal(pool.failure, null);
    assert.equal((await pool.run()).events.length, 8);
  });
});

Deno.test("worker group: heartbeats go on the shared board: an idle group posts none on its control channel, and is not hung", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  await withPool({
    schedule,
    executor: { module: SYNTH, options: { ms: 1 } },
    heartbeatIntervalMs: 50,
    policy: { heartbeatMs: 1000 }, // a loaded machine may starve a thread for half a second
  }, async (pool) => {
    const channel = new BroadcastChannel(CHANNEL_PREFIX + pool.runId);
    const kinds: string[] = [];
    channel.onmessage = (e) => kinds.push(String((e.data as { c?: unknown })?.c));
    try {
      await pool.run();
      // Over two heartbeat timeouts of idling: a rank whose beats were not
      // seen would be declared hung.
      await new Promise((resolve) => setTimeout(resolve, 2500));
    } finally {
      channel.close();
    }
    assert.equal(pool.failure, null);
    assert.deepEqual(kinds.filter((c) => c === "hb"), [], `control messages: ${kinds.join(", ")}`);
    assert.equal((await pool.run()).events.length, 8);
  });
});

Deno.test("worker group: a worker awaiting forever is caught by the stall timeout", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 3, microBatches: 4 });
  const { error, ms } = await failure({
    schedule,
    executor: { module: SYNTH, options: { ms: 2 } },
    // A stall timeout that a loaded machine's pauses (half a second) do not reach.
    policy: { faultInjection: { hangAt: "1B3", hang: "await" }, stallTimeoutMs: 2500 },
  });
  assert.ok(ms < 10_000, `rejected after ${ms} ms`);
  assert.equal(error.kind, "stall");
  assert.match(error.message, /^rank 1 stalled in 1B3 \(stage 1, microBatch 3, iteration 0\)/);
});

Deno.test("worker group: an executor that cannot be built fails create, leaving no worker", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  await assert.rejects(
    WorkerRankGroup.create({ schedule, executor: { module: SYNTH, options: { ms: -1 } } }),
    (e: Error) =>
      e instanceof PipelineRankError && e.kind === "startup" &&
      /synthetic ms must be a finite number >= 0 ms, got -1/.test(e.message),
  );
  assert.equal(liveWorkers(), 0);
  await assert.rejects(
    WorkerRankGroup.create({
      schedule,
      executor: { module: new URL("./_no_such_module.ts", import.meta.url) },
    }),
    (e: Error) => e instanceof PipelineRankError && /_no_such_module/.test(e.message),
  );
  assert.equal(liveWorkers(), 0);
  const t = performance.now();
  await assert.rejects(
    WorkerRankGroup.create({
      schedule,
      executor: { module: new URL("./_never_ready_executor.ts", import.meta.url) },
      startupTimeoutMs: 800,
    }),
    (e: Error) =>
      e instanceof PipelineRankError && e.kind === "startup" &&
      /0 of 2 workers ready \(2 met\) after 800 ms/.test(e.message),
  );
  assert.ok(performance.now() - t < 30_000); // liveness: the message names the 800 ms timeout
  assert.equal(liveWorkers(), 0);
});

Deno.test("worker group: bad schedules and options are refused before any worker starts", async () => {
  const deadlock = deadlocked2x2();
  await assert.rejects(
    WorkerRankGroup.create({ schedule: deadlock, executor: { module: SYNTH } }),
    ScheduleDeadlockError,
  );
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  await assert.rejects(
    WorkerRankGroup.create({ schedule, executor: { module: SYNTH }, policy: { heartbeatMs: 0 } }),
    /heartbeatMs must be a finite number of ms > 0, got 0/,
  );
  await assert.rejects(
    WorkerRankGroup.create({
      schedule,
      executor: { module: SYNTH },
      heartbeatIntervalMs: 500,
      policy: { heartbeatMs: 400 },
    }),
    /heartbeatMs \(400\) must exceed heartbeatIntervalMs \(500\)/,
  );
  assert.equal(liveWorkers(), 0);
  await withPool({ schedule, executor: { module: SYNTH, options: { ms: 0 } } }, async (pool) => {
    await assert.rejects(
      pool.run({ iterations: 0 }),
      /iterations must be a positive integer, got 0/,
    );
    await assert.rejects(
      pool.call(5, "x" as never, null as never),
      /rank must be in \[0, 1\], got 5/,
    );
    const first = pool.run();
    await assert.rejects(pool.run(), /a run is already in progress/);
    await first;
  });
});
