// GradientSync (src/pipeline/runtime/gradient_sync.ts): the average across
// replicas is the fixed-order mean of every replica's gradients, the same on
// every replica; and in runRank a stage's average does not hold up the
// rank's other stages: the rank goes on with them while it is under way and
// steps the stage once it is complete, before its iteration ends.

import assert from "node:assert/strict";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import type { CommBackend } from "../../../src/pipeline/comm/backend.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { formatAction } from "../../../src/pipeline/schedule/action.ts";
import { runRank } from "../../../src/pipeline/runtime/rank_interpreter.ts";
import { GradientSync, ReplicaComm } from "../../../src/pipeline/runtime/gradient_sync.ts";
import type { RankExecutor } from "../../../src/pipeline/runtime/rank_executor.ts";

for (const d of [2, 3, 4]) {
  Deno.test(`GradientSync: D = ${d}: every replica gets the same float64-summed mean, bucket by bucket`, async () => {
    const comms = InProcessBackend.createGroup(d);
    // Two parameters, cut into buckets of 4 bytes (one value each); values
    // whose f32 sum would round differently from their f64 sum.
    const grads = Array.from({ length: d }, (_, k) => [
      Float32Array.from([0.1 * (k + 1), 1e8 + k, 16777216 + 2 * k + 1]),
      Float32Array.from([k === 1 ? -1 : 1]),
    ]);
    const got: Float32Array[][] = [];
    await Promise.all(
      comms.map((comm, k) =>
        new GradientSync({ comm, replicas: d, pipelineRanks: 1, bucketBytes: 4 }).reduce(2, 5, 0, {
          gradients: () => grads[k].map((g) => g.slice()), // copies, as the executor contract says
          setGradients: (stage, g) => {
            assert.equal(stage, 2);
            got[k] = [...g];
          },
        })
      ),
    );
    // The definition: sum in f64 from 0 in replica order, divide by D, round to f32 once.
    const mean = (i: number, j: number) => {
      let s = 0;
      for (let k = 0; k < d; k++) s += grads[k][i][j];
      return s / d;
    };
    const want = [
      Float32Array.from([mean(0, 0), mean(0, 1), mean(0, 2)]),
      Float32Array.from([mean(1, 0)]),
    ];
    for (let k = 0; k < d; k++) assert.deepEqual(got[k], want, `replica ${k}`);
    for (const c of comms) c.close();
  });
}

// Replica `k`'s transport, logging the arrays it sends and receives (what
// `deliver` makes of each received one: by default the array itself).
function logged(
  comm: CommBackend,
  sent: Float32Array[],
  received: Float32Array[],
  deliver = (r: Float32Array): Float32Array => r,
): CommBackend {
  return new Proxy(comm, {
    get(target, key) {
      if (key === "send") {
        return (peer: number, tag: string, data: Float32Array, o?: { transfer?: boolean }) => {
          sent.push(data);
          return target.send(peer, tag, data, o);
        };
      }
      if (key === "recv") {
        return async (peer: number, tag: string) => {
          const r = deliver(await target.recv(peer, tag));
          received.push(r);
          return r;
        };
      }
      const v = Reflect.get(target, key);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

Deno.test("GradientSync: from its second step on, a rank packs its sends into the buffers it received, and the average stays exact", async () => {
  const d = 3;
  const comms = InProcessBackend.createGroup(d);
  const logs = comms.map(() => ({ sent: [] as Float32Array[], received: [] as Float32Array[] }));
  const syncs = comms.map((comm, k) =>
    new GradientSync({
      comm: logged(comm, logs[k].sent, logs[k].received),
      replicas: d,
      pipelineRanks: 1,
      bucketBytes: 8, // buckets of 2 values: [a0 a1] [a2 b0] [b1]
    })
  );
  let previous: Float32Array[][] = [];
  for (let it = 0; it < 3; it++) {
    const grads = [0, 1, 2].map((k) => [
      Float32Array.from([k + it, 2 * k, -k]),
      Float32Array.from([10 * k + it, 0.5 * k]),
    ]);
    const got: Float32Array[][] = [];
    for (const l of logs) l.sent.length = l.received.length = 0;
    await Promise.all(syncs.map((sync, k) =>
      sync.reduce(0, it, 0, {
        gradients: () => grads[k].map((g) => g.slice()),
        setGradients: (_s, g) => void (got[k] = [...g]),
      })
    ));
    const mean = (p: number, i: number) => (grads[0][p][i] + grads[1][p][i] + grads[2][p][i]) / 3;
    const want = [
      Float32Array.from([0, 1, 2].map((i) => mean(0, i))),
      Float32Array.from([0, 1].map((i) => mean(1, i))),
    ];
    for (let k = 0; k < d; k++) assert.deepEqual(got[k], want, `iteration ${it}, replica ${k}`);
    // 3 buckets, each sent to and received from 2 peers.
    for (const l of logs) assert.deepEqual([l.sent.length, l.received.length], [6, 6]);
    if (it > 0) {
      // Every buffer sent this time is one received last time (none new).
      for (const [k, l] of logs.entries()) {
        for (const s of l.sent) {
          assert.ok(previous[k].includes(s), `replica ${k} sent a new buffer`);
        }
      }
    }
    previous = logs.map((l) => [...l.received]);
  }
  for (const c of comms) c.close();
});

Deno.test("GradientSync: parameters that share one array (tied) still get the exact mean on every replica", async () => {
  const comms = InProcessBackend.createGroup(2);
  const got: Float32Array[][] = [];
  await Promise.all(
    comms.map((comm, k) =>
      new GradientSync({ comm, replicas: 2, pipelineRanks: 1 }).reduce(0, 0, 0, {
        gradients: () => {
          const tied = Float32Array.from([4 * k]);
          return [tied, tied]; // one array for two parameters
        },
        setGradients: (_s, g) => void (got[k] = g.map((a) => a.slice())),
      })
    ),
  );
  assert.deepEqual(got, [[Float32Array.from([2]), Float32Array.from([2])], [
    Float32Array.from([2]),
    Float32Array.from([2]),
  ]]);
  for (const c of comms) c.close();
});

Deno.test("GradientSync: a received array that is a view into a larger buffer is never written into", async () => {
  const comms = InProcessBackend.createGroup(2);
  // Replica 1's transport hands each received bucket over as a view into a
  // buffer with a sentinel on either side.
  const backing: Float32Array[] = [], views: Float32Array[] = [], sent: Float32Array[] = [];
  const viewing = logged(comms[1], sent, views, (r) => {
    const big = new Float32Array(r.length + 2).fill(-7);
    big.set(r, 1);
    backing.push(big);
    return big.subarray(1, 1 + r.length);
  });
  const syncs = [comms[0], viewing].map((comm) =>
    new GradientSync({ comm, replicas: 2, pipelineRanks: 1 })
  );
  for (let it = 0; it < 3; it++) {
    const got: Float32Array[][] = [];
    await Promise.all(syncs.map((sync, k) =>
      sync.reduce(0, it, 0, {
        gradients: () => [Float32Array.from([k + it, 10 * k])],
        setGradients: (_s, g) => void (got[k] = [...g]),
      })
    ));
    for (let k = 0; k < 2; k++) assert.deepEqual(got[k], [Float32Array.from([0.5 + it, 5])]);
  }
  // Not one of the views came back as a buffer to pack into, and the
  // transport's buffers are as it left them.
  assert.equal(sent.length, 3);
  for (const a of sent) assert.ok(!views.includes(a), "a received view was packed into");
  for (const [i, big] of backing.entries()) {
    assert.deepEqual([...big], [-7, i, 0, -7]); // replica 0's gradients of iteration i
  }
  for (const c of comms) c.close();
});

Deno.test("GradientSync: one replica averages nothing; an executor without gradients is refused", () => {
  const [comm] = InProcessBackend.createGroup(1);
  const sync = new GradientSync({ comm, replicas: 1, pipelineRanks: 1 });
  assert.equal(sync.start(0, 0, 0, {}), null);
  const [a, b] = InProcessBackend.createGroup(2);
  assert.throws(
    () => new GradientSync({ comm: a, replicas: 2, pipelineRanks: 1 }).start(0, 0, 0, {}),
    /data parallelism needs an executor with gradients\(stage\) and setGradients/,
  );
  for (const c of [comm, a, b]) c.close();
});

// A rank executor holding stages 0 and 1 (ZB-V at P = 1) that logs its calls.
function loggingExecutor(log: string[]): RankExecutor {
  const one = () => new Float32Array([1]);
  return {
    forward: (ctx) => (log.push(formatAction(ctx.action)), one()),
    backwardInput: (ctx) => (log.push(formatAction(ctx.action)), one()),
    backward: (ctx) => (log.push(formatAction(ctx.action)), one()),
    backwardWeight: (ctx) => void log.push(formatAction(ctx.action)),
    gradients: (stage) => [new Float32Array([stage + 1])],
    setGradients: (stage) => void log.push(`average ${stage}`),
    step: (stage) => void log.push(`step ${stage}`),
  };
}

// Replica 1's transport, holding back its buckets of `stage` for `ms`.
function slowToReduce(comm: CommBackend, stage: number, ms: number): CommBackend {
  return new Proxy(comm, {
    get(target, key) {
      if (key === "send") {
        return (peer: number, tag: string, data: Float32Array, o?: { transfer?: boolean }) =>
          tag.startsWith("reduce/") && tag.includes(`/s${stage}/`)
            ? new Promise<void>((done) =>
              setTimeout(() => target.send(peer, tag, data, o).then(done), ms)
            )
            : target.send(peer, tag, data, o);
      }
      const v = Reflect.get(target, key);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

Deno.test("runRank with replicas: a stage's average runs while the rank goes on with its other stage; each stage steps after its average, before the iteration ends", async () => {
  const schedule = generateSchedule("zb-v", { ranks: 1, microBatches: 2 });
  // Rank 0 runs 0F0 1F0 1I0 1W0 0F1 0I0 0W0 1F1 1I1 1W1 0I1 0W1: stage 1's
  // last backward (1W1) comes before stage 0's last two actions.
  const global = InProcessBackend.createGroup(2);
  const logs: string[][] = [[], []];
  await Promise.all([0, 1].map((k) => {
    const comm = k === 1 ? slowToReduce(global[1], 1, 300) : global[0];
    return runRank({
      schedule,
      rank: 0,
      comm: new ReplicaComm(comm, k, 1),
      gradientSync: new GradientSync({ comm, replicas: 2, pipelineRanks: 1 }),
      executor: loggingExecutor(logs[k]),
      iterations: 2,
    });
  }));
  const first = logs[0].slice(0, logs[0].indexOf("step 0") + 1);
  // Replica 0 did not wait for replica 1's late average of stage 1.
  assert.deepEqual(first, [
    ..."0F0 1F0 1I0 1W0 0F1 0I0 0W0 1F1 1I1 1W1 0I1 0W1".split(" "),
    "average 1",
    "step 1",
    "average 0",
    "step 0",
  ]);
  // Both replicas: each stage's average before its step, both steps of the
  // first iteration before the second iteration's first action.
  for (const log of logs) {
    assert.equal(log.filter((e) => /^\d[FIW]\d$/.test(e)).length, 24, log.join(" "));
    const second = log.indexOf("0F0", 1);
    for (const s of [0, 1]) {
      const avg = log.indexOf(`average ${s}`), step = log.indexOf(`step ${s}`);
      assert.ok(avg >= 0 && avg < step && step < second, log.join(" "));
      assert.equal(log.filter((e) => e === `step ${s}`).length, 2, log.join(" "));
    }
  }
  for (const c of global) c.close();
});

Deno.test("runRank with replicas: a stage whose average is in before the rank's next action steps there, mid-iteration", async () => {
  const schedule = generateSchedule("zb-v", { ranks: 1, microBatches: 2 });
  const global = InProcessBackend.createGroup(2);
  const logs: string[][] = [[], []];
  await Promise.all([0, 1].map((k) =>
    runRank({
      schedule,
      rank: 0,
      comm: new ReplicaComm(global[k], k, 1),
      gradientSync: new GradientSync({ comm: global[k], replicas: 2, pipelineRanks: 1 }),
      executor: loggingExecutor(logs[k]),
    })
  ));
  // The replicas take turns action by action: the second to finish stage 1
  // finds the first's buckets there and steps stage 1 before its 0I1.
  const early = logs.filter((log) => log.indexOf("step 1") < log.indexOf("0I1"));
  assert.ok(early.length >= 1, logs.map((l) => l.join(" ")).join("\n"));
  for (const log of logs) assert.ok(log.indexOf("average 1") < log.indexOf("step 1"));
  for (const c of global) c.close();
});

Deno.test("runRank with replicas and clipping: checks settling late on one replica leave no message behind", async () => {
  const schedule = generateSchedule("zb-v", { ranks: 1, microBatches: 2 });
  const global = InProcessBackend.createGroup(2);
  // Every step's check (a large norm: every step is redone clipped) settles
  // at once on replica 0 and 40 ms later on replica 1.
  const executor = (delayMs: number): RankExecutor => ({
    ...loggingExecutor([]),
    step: () => ({
      check: new Promise((done) =>
        setTimeout(() => done({ finite: true, normSquared: 100 }), delayMs)
      ),
    }),
    redoStep: () => {},
  });
  const runs = await Promise.all([0, 1].map((k) =>
    runRank({
      schedule,
      rank: 0,
      comm: new ReplicaComm(global[k], k, 1),
      gradientSync: new GradientSync({ comm: global[k], replicas: 2, pipelineRanks: 1 }),
      executor: executor(k === 0 ? 0 : 40),
      iterations: 4,
      policy: { clipGradNorm: 1 },
    })
  ));
  for (const r of runs) {
    assert.deepEqual(r.gradNorms.map((g) => g.clipped), [true, true, true, true]);
  }
  // Nothing either replica sent is left unread (discard counts what it drops).
  assert.deepEqual(global.map((c) => c.discard(() => true)), [0, 0]);
  for (const c of global) c.close();
});
