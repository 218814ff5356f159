// SpmdRankGroup's SPMD logic without MPI: one group per rank, each over its
// own InProcessBackend rank, created and driven concurrently exactly as P
// processes running the same script would (the real mpirun jobs are in
// tests/cli_mpi_test.ts).

import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import type { Schedule } from "../../../src/pipeline/schedule/schedule.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import { CommAbortedError } from "../../../src/pipeline/comm/backend.ts";
import { SpmdRankGroup } from "../../../src/pipeline/runtime/spmd_rank_group.ts";
import type { RankGroupRunOptions } from "../../../src/pipeline/runtime/rank_group.ts";
import { PipelineRankError } from "../../../src/pipeline/runtime/pipeline_rank_error.ts";
import type {
  RankExecutor,
  RankExecutorInit,
} from "../../../src/pipeline/runtime/rank_executor.ts";
import { createSyntheticExecutor } from "../../../src/pipeline/testing/synthetic_executor.ts";

type Calls = {
  readonly echo: { readonly args: number; readonly result: { rank: number; args: number } };
  readonly boom: { readonly args: null; readonly result: null };
};

// The synthetic executor, plus: each iteration reports the payload it got,
// `echo` answers with its rank and the arguments it was given, `boom` throws.
function createExecutor(init: RankExecutorInit): RankExecutor<Calls> {
  const inner = createSyntheticExecutor({ ...init, options: { ms: 0 } });
  const opts = (init.options ?? {}) as { failCreate?: boolean };
  if (opts.failCreate) throw new Error("no device here");
  let payload: unknown = undefined;
  return {
    ...inner,
    forward: inner.forward.bind(inner),
    backward: inner.backward.bind(inner),
    backwardInput: inner.backwardInput.bind(inner),
    backwardWeight: inner.backwardWeight.bind(inner),
    step: inner.step.bind(inner),
    beginIteration: (_it, p) => void (payload = p),
    endIteration: (it) => ({ rank: init.rank, it, payload }),
    calls: {
      echo: (args) => ({ rank: init.rank, args }),
      boom: () => {
        throw new Error(`rank ${init.rank} cannot`);
      },
    },
  };
}

// The synthetic executor with the gradients data parallelism reads and sets.
function withGradients(
  init: RankExecutorInit,
  gradients: NonNullable<RankExecutor["gradients"]>,
  setGradients: NonNullable<RankExecutor["setGradients"]>,
): RankExecutor {
  const inner = createSyntheticExecutor({ ...init, options: { ms: 0 } });
  return {
    ...inner,
    forward: inner.forward.bind(inner),
    backward: inner.backward.bind(inner),
    step: inner.step.bind(inner),
    gradients,
    setGradients,
  };
}

// One "process" per rank: its group over its own comm.
async function spmd(
  schedule: Schedule | ((rank: number) => Schedule),
  executorOptions: (rank: number) => unknown = () => ({}),
): Promise<{ groups: SpmdRankGroup<Calls>[]; comms: InProcessBackend[] }> {
  const p = typeof schedule === "function" ? schedule(0).ranks : schedule.ranks;
  const comms = InProcessBackend.createGroup(p);
  const groups = await Promise.all(comms.map((comm) =>
    SpmdRankGroup.create<Calls>({
      schedule: typeof schedule === "function" ? schedule(comm.rank) : schedule,
      comm,
      createExecutor: createExecutor,
      executorOptions: executorOptions(comm.rank),
    })
  ));
  return { groups, comms };
}

async function settleAll<T>(ps: Promise<T>[]): Promise<PromiseSettledResult<T>[]> {
  return await Promise.allSettled(ps);
}

function reasons(rs: PromiseSettledResult<unknown>[]): Error[] {
  return rs.map((r, i) => {
    assert.equal(r.status, "rejected", `rank ${i} rejects`);
    return (r as PromiseRejectedResult).reason as Error;
  });
}

async function closeAll(groups: SpmdRankGroup<Calls>[], comms: InProcessBackend[]): Promise<void> {
  await Promise.all(groups.map((g) => g.dispose()));
  for (const c of comms) c.close();
}

Deno.test("SpmdRankGroup: every rank's run resolves with every rank's events and reports", async () => {
  const schedule = generateSchedule("zb-h1", { ranks: 3, microBatches: 4 });
  const { groups, comms } = await spmd(schedule);
  try {
    assert.deepEqual(groups.map((g) => [g.kind, g.localRank]), [["mpi", 0], ["mpi", 1], [
      "mpi",
      2,
    ]]);
    const runs = await Promise.all(groups.map((g) => g.run({ iterations: 2 })));
    const perRank = schedule.actions.map((a) => a.length);
    for (const r of runs) {
      assert.equal(r.firstIteration, 0);
      assert.equal(r.events.length, 2 * perRank.reduce((a, b) => a + b, 0));
      for (let q = 0; q < 3; q++) {
        assert.equal(r.events.filter((e) => e.rank === q).length, 2 * perRank[q]);
        assert.deepEqual(r.reports[q].map((x) => (x as { rank: number }).rank), [q, q]);
      }
      assert.ok(r.events.every((e) => e.start >= 0 && e.end >= e.start));
    }
    // The same run everywhere: same events in the same order.
    const key = (r: typeof runs[0]) =>
      r.events.map((e) =>
        `${e.rank}:${e.action.kind}${e.action.stage}.${e.action.microBatch}@${e.iteration}`
      ).join(" ");
    assert.equal(key(runs[1]), key(runs[0]));
    assert.equal(key(runs[2]), key(runs[0]));
    const again = await Promise.all(groups.map((g) => g.run()));
    assert.deepEqual(again.map((r) => r.firstIteration), [2, 2, 2]);
  } finally {
    await closeAll(groups, comms);
  }
});

Deno.test("SpmdRankGroup: payloads given on rank 0 only reach the other ranks; own payloads are kept", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 3, microBatches: 3 });
  const { groups, comms } = await spmd(schedule);
  try {
    const from = (who: string) => (rank: number, i: number) => ({ who, rank, i });
    // Rank 0 only.
    const runs = await Promise.all(
      groups.map((g, r) =>
        g.run(r === 0 ? { iterations: 2, payload: from("zero") } : { iterations: 2 })
      ),
    );
    for (const run of runs) {
      for (let q = 0; q < 3; q++) {
        assert.deepEqual(
          run.reports[q].map((x) => (x as { payload: unknown }).payload),
          [{ who: "zero", rank: q, i: 0 }, { who: "zero", rank: q, i: 1 }],
        );
      }
    }
    // Every rank has its own: nothing comes from rank 0.
    const own = await Promise.all(groups.map((g, r) => g.run({ payload: from(`own${r}`) })));
    for (let q = 0; q < 3; q++) {
      assert.deepEqual((own[0].reports[q][0] as { payload: unknown }).payload, {
        who: `own${q}`,
        rank: q,
        i: 0,
      });
    }
  } finally {
    await closeAll(groups, comms);
  }
});

Deno.test("SpmdRankGroup: call runs on the named rank with its arguments and resolves everywhere", async () => {
  const schedule = generateSchedule("gpipe", { ranks: 3, microBatches: 2 });
  const { groups, comms } = await spmd(schedule);
  try {
    // Each rank passes its own arguments; rank 1's are the ones used.
    const replies = await Promise.all(groups.map((g, r) => g.call(1, "echo", 100 + r)));
    assert.deepEqual(replies, [{ rank: 1, args: 101 }, { rank: 1, args: 101 }, {
      rank: 1,
      args: 101,
    }]);
    // Concurrent calls to every rank, as the model makes them.
    const all = await Promise.all(
      groups.map((g) => Promise.all([0, 1, 2].map((q) => g.call(q, "echo", g.localRank)))),
    );
    for (const got of all) assert.deepEqual(got, [0, 1, 2].map((q) => ({ rank: q, args: q })));
    // A failing call rejects on every rank, naming the rank; the group stays usable.
    const failed = reasons(await settleAll(groups.map((g) => g.call(2, "boom", null))));
    assert.match(failed[2].message, /^rank 2 cannot$/);
    for (const e of failed.slice(0, 2)) {
      assert.match(e.message, /^rank 2: boom failed: rank 2 cannot$/);
    }
    const unknown = reasons(
      await settleAll(groups.map((g) => g.call(0, "nope" as "boom", null))),
    );
    for (const e of unknown) assert.match(e.message, /answers no call "nope"/);
    assert.deepEqual(await Promise.all(groups.map((g) => g.call(0, "echo", 7))), [
      { rank: 0, args: 7 },
      { rank: 0, args: 7 },
      { rank: 0, args: 7 },
    ]);
    await assert.rejects(groups[0].call(3, "echo", 0), /rank must be in \[0, 2\], got 3/);
  } finally {
    await closeAll(groups, comms);
  }
});

Deno.test("SpmdRankGroup: a rank running other iterations than rank 0 fails every rank, named", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  const { groups, comms } = await spmd(schedule);
  try {
    const opts: RankGroupRunOptions[] = [{ iterations: 1 }, { iterations: 2 }];
    const errs = reasons(await settleAll(groups.map((g, r) => g.run(opts[r]))));
    assert.match(errs[0].message, /rank 1 runs 2 iteration\(s\) where rank 0 runs 1/);
    assert.ok(errs[1] instanceof CommAbortedError);
    assert.match(errs[1].message, /rank 0: rank 1 runs 2 iteration/);
    assert.ok(groups.every((g) => g.closed && g.failure !== null));
  } finally {
    await closeAll(groups, comms);
  }
});

Deno.test("SpmdRankGroup: an action failing on one rank rejects every rank's run, naming it", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 3, microBatches: 3 });
  const comms = InProcessBackend.createGroup(3);
  const groups = await Promise.all(comms.map((comm) =>
    SpmdRankGroup.create<Calls>({
      schedule,
      comm,
      createExecutor,
      policy: { faultInjection: { failAt: "1B1" } },
    })
  ));
  try {
    const errs = reasons(await settleAll(groups.map((g) => g.run())));
    assert.ok(errs[1] instanceof PipelineRankError, String(errs[1]));
    assert.match(errs[1].message, /^rank 1 failed in 1B1/);
    for (const q of [0, 2]) {
      assert.ok(errs[q] instanceof CommAbortedError, String(errs[q]));
      assert.match(errs[q].message, /rank 1: rank 1 failed in 1B1/);
    }
    await assert.rejects(groups[0].run(), /the rank group failed and is closed/);
  } finally {
    await closeAll(groups, comms);
  }
});

Deno.test("SpmdRankGroup: creation checks the transport size, every rank's build and schedule", async () => {
  const two = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  const [lone] = InProcessBackend.createGroup(1);
  await assert.rejects(
    SpmdRankGroup.create({ schedule: two, comm: lone, createExecutor }),
    (e: Error) =>
      e instanceof RangeError &&
      /the schedule has 2 ranks but the transport has 1 .*mpirun -n 2/.test(e.message),
  );
  lone.close();
  // Rank 1 cannot build its stages: every rank learns it.
  let comms = InProcessBackend.createGroup(2);
  let errs = reasons(
    await settleAll(comms.map((comm) =>
      SpmdRankGroup.create({
        schedule: two,
        comm,
        createExecutor,
        executorOptions: { failCreate: comm.rank === 1 },
      })
    )),
  );
  for (const e of errs) {
    assert.match(e.message, /could not build every rank's stages: rank 1: no device here/);
  }
  for (const c of comms) c.close();
  // Rank 1 planned another schedule.
  comms = InProcessBackend.createGroup(2);
  errs = reasons(
    await settleAll(comms.map((comm) =>
      SpmdRankGroup.create({
        schedule: comm.rank === 1 ? generateSchedule("gpipe", { ranks: 2, microBatches: 2 }) : two,
        comm,
        createExecutor,
      })
    )),
  );
  for (const e of errs) {
    assert.match(e.message, /rank\(s\) 1 planned a different pipeline than rank 0/);
  }
  for (const c of comms) c.close();
  await assert.rejects(
    SpmdRankGroup.create({ schedule: two, comm: null as never, createExecutor }),
    TypeError,
  );
});

Deno.test("SPMD dataParallel 2 × P 2: each process runs its pipeline rank on its replica's view, gradients averaged across replicas, events by global rank", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  const comms = InProcessBackend.createGroup(4);
  const seen: { rank: number; size: number; global: number }[] = [];
  const averaged = new Map<number, number[]>();
  const groups = await Promise.all(comms.map((comm) =>
    SpmdRankGroup.create({
      schedule,
      comm,
      dataParallel: 2,
      // A function of the global rank, as in the other groups.
      executorOptions: (g: number) => ({ global: g }),
      createExecutor: (init: RankExecutorInit): RankExecutor => {
        const g = (init.options as { global: number }).global;
        seen.push({ rank: init.rank, size: init.comm!.size, global: g });
        // Global rank g's gradient of its one stage: g + 1, then g + 10.
        return withGradients(
          init,
          () => [new Float32Array([g + 1, g + 10])],
          (_s, grads) => void averaged.set(g, [...grads[0]]),
        );
      },
    })
  ));
  try {
    assert.deepEqual(
      seen.sort((a, b) => a.global - b.global),
      [0, 1, 2, 3].map((g) => ({ rank: g % 2, size: 2, global: g })),
    );
    assert.ok(groups.every((g) => g.ranks === 4 && g.replicas === 2));
    const runs = await Promise.all(groups.map((g) => g.run()));
    // Pipeline rank 0 is held by global ranks 0 and 2, pipeline rank 1 by 1 and 3.
    assert.deepEqual(averaged.get(0), [2, 11]);
    assert.deepEqual(averaged.get(2), [2, 11]);
    assert.deepEqual(averaged.get(1), [3, 12]);
    assert.deepEqual(averaged.get(3), [3, 12]);
    for (const r of runs) {
      assert.deepEqual([...new Set(r.events.map((e) => e.rank))].sort(), [0, 1, 2, 3]);
      assert.equal(r.events.length, 4 * 4, "every global rank's F and B of 2 micro-batches");
    }
  } finally {
    await Promise.all(groups.map((g) => g.dispose()));
    for (const c of comms) c.close();
  }
});

Deno.test("SPMD dataParallel: other than D·P processes, or a bad D, is refused before any executor is built", async () => {
  const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  const comms = InProcessBackend.createGroup(3);
  let built = 0;
  try {
    for (
      const [d, re] of [
        [2, /dataParallel 2 replicas of a 2-rank schedule need 4 ranks but the transport has 3/],
        [0, /dataParallel must be a positive integer \(the replicas D\), got 0/],
      ] as const
    ) {
      await assert.rejects(
        SpmdRankGroup.create({
          schedule,
          comm: comms[0],
          dataParallel: d,
          createExecutor: (init) => (built++, createSyntheticExecutor(init)),
        }),
        (e: Error) => e instanceof RangeError && re.test(e.message),
      );
    }
    assert.equal(built, 0);
  } finally {
    for (const c of comms) c.close();
  }
});

// A transport whose receives fail, once `lose()` is called, as MPI's do when
// it finds rank `lost` gone: a CommAbortedError carrying the lost rank.
function losing(comm: InProcessBackend, lost: number, why: string) {
  let gone = false;
  const proxy = new Proxy(comm, {
    get(target, key) {
      if (key === "recv") {
        return (peer: number, tag: string) =>
          gone
            ? Promise.reject(new CommAbortedError(`rank ${lost} lost: ${why}`, { rank: lost, why }))
            : target.recv(peer, tag);
      }
      const v = Reflect.get(target, key);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  return { comm: proxy, lose: () => void (gone = true) };
}

for (
  const [d, why, kind, message] of [
    [
      1,
      "its process 4242 on host-a has ended; its last heartbeat, 0.3 s before: computing 1F0 (stage 1, microBatch 0, iteration 0)",
      "exit",
      "rank 1 exited: its process 4242 on host-a has ended; its last heartbeat, 0.3 s before: computing 1F0 (stage 1, microBatch 0, iteration 0)",
    ],
    [
      2,
      "hung: no message for 5.0 s and its process 4243 used no CPU for 5.0 s (it is stopped)",
      "hang",
      "rank 1 hung: replica 1, pipeline rank 0: no message for 5.0 s and its process 4243 used no CPU for 5.0 s (it is stopped)",
    ],
    [
      2,
      "no message for 15.0 s from host-b",
      "hang",
      "rank 1 hung: replica 1, pipeline rank 0: no message for 15.0 s from host-b",
    ],
  ] as const
) {
  Deno.test(`SpmdRankGroup: a process the transport lost (${kind}, D = ${d}: "${why.split(" ").slice(0, 3).join(" ")} …") fails the others' run with a PipelineRankError for it, named in the grid`, async () => {
    // P = 2 at D = 1; D = 2 replicas of P = 1: either way global rank 1 is lost.
    const schedule = generateSchedule("1f1b", { ranks: 3 - d, microBatches: 2 });
    const comms = InProcessBackend.createGroup(2);
    const zero = losing(comms[0], 1, why);
    const groups = await Promise.all([zero.comm, comms[1]].map((comm) =>
      SpmdRankGroup.create({
        schedule,
        comm,
        dataParallel: d,
        createExecutor: (init: RankExecutorInit): RankExecutor =>
          withGradients(init, () => [new Float32Array([1])], () => {}),
      })
    ));
    try {
      zero.lose(); // rank 1's process is gone: it never runs
      const e = await groups[0].run().then(() => null, (e) => e);
      assert.ok(e instanceof PipelineRankError, `a PipelineRankError, got ${e}`);
      assert.equal(e.rank, 1);
      assert.equal(e.kind, kind);
      assert.equal(e.message, message);
      assert.ok(e.cause instanceof CommAbortedError);
    } finally {
      await Promise.all(groups.map((g) => g.dispose()));
      for (const c of comms) c.close();
    }
  });
}
