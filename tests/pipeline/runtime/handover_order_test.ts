// An output is handed to its neighbour before the rank's next action ends,
// even when every action computes synchronously and never yields: checked by
// the order of events through shared memory, not by a clock.

import assert from "node:assert/strict";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import type { Schedule } from "../../../src/pipeline/schedule/schedule.ts";
import { WorkerRankGroup } from "../../../src/pipeline/runtime/worker_rank_group.ts";
import { runRank } from "../../../src/pipeline/runtime/rank_interpreter.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import type { CommBackend } from "../../../src/pipeline/comm/backend.ts";
import { formatAction } from "../../../src/pipeline/schedule/action.ts";
import type { RankExecutor } from "../../../src/pipeline/runtime/rank_executor.ts";
import { createRankExecutor, type HandoverOptions } from "./_handover_executor.ts";

const MODULE = new URL("./_handover_executor.ts", import.meta.url).href;
// Only a broken runtime reaches this bound; a working one waits microseconds.
const CAP_MS = 5_000;

function outcomes(shared: SharedArrayBuffer, m: number): { inTime: number; missed: number } {
  const flags = new Int32Array(shared);
  return { inTime: flags[2 * m], missed: flags[2 * m + 1] };
}

for (const name of ["gpipe", "1f1b"]) {
  for (const output of ["array", "promise"] as const) {
    Deno.test(`hand-over (workers, ${name}, ${output} outputs): the neighbour receives action k's output before action k+1 ends`, async () => {
      const m = 4;
      const schedule = generateSchedule(name, { ranks: 2, microBatches: m });
      const shared = new SharedArrayBuffer(4 * (2 * m + 2));
      const options: HandoverOptions = { shared, output, capMs: CAP_MS };
      const pool = await WorkerRankGroup.create({
        schedule,
        executor: { module: MODULE, options },
      });
      try {
        await pool.run();
      } finally {
        await pool.dispose();
      }
      assert.equal(liveWorkers(), 0, "every worker ended");
      const r = outcomes(shared, m);
      assert.equal(r.missed, 0, `outputs held back past the next action: ${JSON.stringify(r)}`);
      // Every action that followed an output waited on it (2m activations and gradients in all).
      assert.ok(r.inTime >= 2 * m - 2, `checked ${r.inTime} hand-overs`);
    });
  }
}

// In one thread the order is seen directly: the transport logs each send as
// it takes the data, the executor logs each action as it starts.
async function inProcessLog(schedule: Schedule, output: "array" | "promise"): Promise<string[]> {
  const log: string[] = [];
  const group = InProcessBackend.createGroup(schedule.ranks);
  const logged = group.map((comm): CommBackend => ({
    rank: comm.rank,
    size: comm.size,
    get aborted() {
      return comm.aborted;
    },
    // Logged when the data is handed to the transport (a promise: once it resolves).
    send: (peer, tag, data, opts) =>
      data instanceof Float32Array
        ? (log.push(`sent ${comm.rank} ${tag}`), comm.send(peer, tag, data, opts))
        : comm.send(
          peer,
          tag,
          Promise.resolve(data).then((d) => (log.push(`sent ${comm.rank} ${tag}`), d)),
          opts,
        ),
    recv: (peer, tag) => comm.recv(peer, tag),
    discard: (match: (tag: string) => boolean) => comm.discard(match),
    barrier: () => comm.barrier(),
    broadcastControl: (msg) => comm.broadcastControl(msg),
    onControl: (h) => comm.onControl(h),
    abort: (reason) => comm.abort(reason),
    close: () => comm.close(),
  }));
  const m = schedule.microBatches;
  const shared = new SharedArrayBuffer(4 * (2 * m + 2));
  const executors = logged.map((comm, rank): RankExecutor => {
    const inner = createRankExecutor({
      rank,
      ranks: schedule.ranks,
      stages: [rank],
      numStages: schedule.ranks,
      microBatches: m,
      options: { shared, output, capMs: 0 } satisfies HandoverOptions,
      abortFlag: new Int32Array(1),
      signal: new AbortController().signal,
      comm,
    }) as RankExecutor;
    const at = (f: (ctx: never, x: never) => unknown) => (ctx: never, x: never) => {
      log.push(`start ${rank} ${formatAction((ctx as { action: never }).action)}`);
      return f(ctx, x);
    };
    return {
      ...inner,
      forward: at(inner.forward as never),
      backward: at(inner.backward as never),
      backwardInput: at(inner.backwardInput as never),
      backwardWeight: at(inner.backwardWeight as never),
    } as RankExecutor;
  });
  try {
    await Promise.all(
      logged.map((comm, rank) => runRank({ schedule, rank, comm, executor: executors[rank] })),
    );
  } finally {
    for (const c of group) c.close();
  }
  return log;
}

for (const output of ["array", "promise"] as const) {
  Deno.test(`hand-over (in-process, ${output} outputs): each output is sent before the rank's next action starts`, async () => {
    const schedule = generateSchedule("zb-h1", { ranks: 2, microBatches: 4 });
    const log = await inProcessLog(schedule, output);
    for (let rank = 0; rank < 2; rank++) {
      const mine = log.filter((l) =>
        l.startsWith(`start ${rank} `) || l.startsWith(`sent ${rank} `)
      );
      // After each action that sends, its send comes before the rank's next start.
      const list = schedule.actions[rank];
      let checked = 0;
      list.forEach((a, i) => {
        const sends = (a.kind === "F" && a.stage < 1) ||
          (a.kind !== "F" && a.kind !== "W" && a.stage > 0);
        if (!sends || i + 1 >= list.length) return;
        const startHere = mine.indexOf(`start ${rank} ${formatAction(a)}`);
        const next = mine.indexOf(`start ${rank} ${formatAction(list[i + 1])}`);
        const sent = mine.findIndex((l, j) => j > startHere && l.startsWith(`sent ${rank} `));
        assert.ok(
          sent > startHere && sent < next,
          `${formatAction(a)}'s output went out before ${formatAction(list[i + 1])} started:\n${
            mine.join("\n")
          }`,
        );
        checked++;
      });
      assert.ok(checked >= 3, `checked ${checked} hand-overs on rank ${rank}`);
    }
  });
}
