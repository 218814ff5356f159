// The fault suite: each fault a user's code can cause (throw, async throw,
// exit, block, loop) at each kind of action (F, I, W, optimizer step), for
// every rank group, asserting the error text, a time bound, and that nothing
// of the group is left running afterwards.
//
// In this thread (in-process) only throw and async throw can be survived:
// exit ends the process and block/loop hold the only thread. In workers, a
// thread held by block/loop survives terminate(): the failure says so,
// naming the rank, and the thread runs on until the process exits, which it
// does not prevent (checked in a child process, which must end by itself);
// in a subprocess group everything ends at once.

import assert from "node:assert/strict";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { WorkerRankGroup } from "../../../src/pipeline/runtime/worker_rank_group.ts";
import { SubprocessRankGroup } from "../../../src/pipeline/runtime/subprocess_rank_group.ts";
import { InProcessRankGroup } from "../../../src/pipeline/runtime/in_process_rank_group.ts";
import { PipelineRankError } from "../../../src/pipeline/runtime/pipeline_rank_error.ts";
import type { RankGroup } from "../../../src/pipeline/runtime/rank_group.ts";
import type { FaultKind } from "../../../src/pipeline/runtime/fault_injection.ts";
import {
  createSyntheticExecutor,
  SYNTHETIC_EXECUTOR_URL,
} from "../../../src/pipeline/testing/synthetic_executor.ts";

const SCRIPT = new URL("./_fault_script.ts", import.meta.url).pathname;
const schedule = generateSchedule("zb-h1", { ranks: 2, microBatches: 2 });
// Long enough that a loaded machine (a rank without CPU for half a second) is not taken for a
// hang or a stall, short enough that the block and loop faults end soon.
const timeouts = { heartbeatMs: 1000, stallTimeoutMs: 2500 };
const executor = { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 1 } };
// Rank 1 holds stage 1: its F, I, W and its optimizer step.
const PLACES = ["1F0", "1I1", "1W0", "step 1"] as const;

/** What the error must say, per fault. */
function expected(fault: FaultKind, at: string): RegExp {
  const where = at.startsWith("step")
    ? String.raw`after 1[IW]\d \(stage 1, microBatch \d, iteration 0\)`
    : String.raw`in ${at} \(stage 1, microBatch \d, iteration 0\)`;
  const what = at.startsWith("step") ? "the optimizer step of stage 1" : at;
  switch (fault) {
    case "throw":
      return new RegExp(`^rank 1 failed ${where}: injected failure at ${what}$`);
    case "async-throw":
      return new RegExp(
        `^rank 1 failed ${where}: unhandled promise rejection: injected unhandled rejection at ${what}`,
      );
    case "exit":
      return new RegExp(`^rank 1 exited ${where}: its worker thread ended`);
    case "block":
      return new RegExp(`^rank 1 hung ${where}: no heartbeat for \\d+ ms`);
    default:
      return new RegExp(`^rank 1 stalled ${where}: no action started on any rank`);
  }
}

/**
 * Ceilings (ms) from the run's start to its rejection: liveness, not speed
 * (that the rejection comes at all). Which path rejected the run is told by
 * its message (`expected`: a throw is named as the throw, a hang by the
 * heartbeat, a loop by the stall timeout), not by its time. On an idle machine
 * a throw is reported in tens of ms and a hang soon after its timeout; on a
 * loaded one "loop at 1W0" took 4.6 s, past the 4.5 s bound this had, so the
 * ceilings are generous.
 */
const LIVENESS_MS = 60_000;
const BOUND: Record<string, number> = {
  "throw": LIVENESS_MS,
  "async-throw": LIVENESS_MS,
  "exit": LIVENESS_MS,
  "block": LIVENESS_MS,
  "loop": LIVENESS_MS,
};

function threads(): number {
  return [...Deno.readDirSync("/proc/self/task")].length;
}

// Host processes started by this process (the machine may run other tests' hosts).
function hostProcesses(): number {
  let n = 0;
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== Deno.pid) continue;
      if (Deno.readTextFileSync(`/proc/${e.name}/cmdline`).includes("subprocess_host.ts")) n++;
    } catch {
      // gone meanwhile
    }
  }
  return n;
}

async function runFault(group: RankGroup, fault: FaultKind, at: string): Promise<void> {
  const t = performance.now();
  const error = await group.run().then(() => null, (e) => e as Error);
  const ms = performance.now() - t;
  assert.ok(error instanceof PipelineRankError, `${fault} at ${at}: ${error}`);
  assert.match(error.message, expected(fault, at), `${fault} at ${at}`);
  assert.ok(ms < BOUND[fault], `${fault} at ${at}: rejected after ${Math.round(ms)} ms`);
  await group.dispose();
}

Deno.test("faults in this thread: throw and async throw at F, I, W and the step name the rank and action", async () => {
  for (const fault of ["throw", "async-throw"] as const) {
    for (const at of PLACES) {
      const group = await InProcessRankGroup.create({
        schedule,
        createExecutor: createSyntheticExecutor,
        executorOptions: { ms: 1 },
        policy: { faultInjection: { at, fault } },
      });
      const error = await group.run().then(() => null, (e) => e as Error);
      assert.ok(error instanceof PipelineRankError, `${fault} at ${at}: ${error}`);
      // In one thread an unhandled rejection surfaces after whichever action started last.
      const what = at.startsWith("step") ? "the optimizer step of stage 1" : at;
      assert.match(
        error.message,
        fault === "throw" ? expected(fault, at) : new RegExp(`unhandled rejection at ${what}`),
      );
      await group.dispose();
    }
  }
});

Deno.test("faults in workers: throw, async throw and exit at F, I, W and the step; no worker left", async () => {
  const before = threads();
  for (const fault of ["throw", "async-throw", "exit"] as const) {
    for (const at of PLACES) {
      const group = await WorkerRankGroup.create({
        schedule,
        executor,
        heartbeatIntervalMs: 100,
        policy: { faultInjection: { at, fault }, ...timeouts },
      });
      await runFault(group, fault, at);
      assert.equal(liveWorkers(), 0);
    }
  }
  assert.ok(threads() <= before, `threads: ${threads()} now, ${before} before`);
});

Deno.test("faults in a subprocess: every fault at F, I, W and the step ends the run and its process", async () => {
  // The four places of one fault at once: each in its own host process.
  for (const fault of ["throw", "async-throw", "exit", "block", "loop"] as const) {
    await Promise.all(PLACES.map(async (at) => {
      const group = await SubprocessRankGroup.create({
        schedule,
        executor,
        heartbeatIntervalMs: 100,
        policy: { faultInjection: { at, fault }, ...timeouts },
      });
      await runFault(group, fault, at);
    }));
    assert.equal(hostProcesses(), 0, `${fault}: every host process is gone`);
  }
});

Deno.test("faults in workers: block and loop hold a thread Deno cannot end; the error names the rank, the script still ends", async () => {
  const one = async (fault: "block" | "loop", at: string) => {
    {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", SCRIPT, "workers", fault, at],
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      const deadline = Date.now() + BOUND[fault] + 8000;
      const lines = () => text.split("\n").slice(0, -1).filter((l) => l.startsWith("{"));
      // One read in flight at a time: a read that loses the race still delivers.
      let pending = reader.read();
      while (lines().length < 2 && Date.now() < deadline) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const r = await Promise.race([
          pending,
          new Promise<null>((resolve) => timer = setTimeout(() => resolve(null), 500)),
        ]);
        clearTimeout(timer);
        if (r === null) continue;
        if (r.done) break;
        text += r.value;
        pending = reader.read();
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const status = await Promise.race([
        child.status,
        new Promise<null>((resolve) => timer = setTimeout(() => resolve(null), 5000)),
      ]);
      clearTimeout(timer);
      if (status === null) {
        child.kill("SIGKILL");
        await child.status;
      }
      pending.catch(() => {});
      await reader.cancel().catch(() => {});
      await child.stderr.cancel().catch(() => {});
      const [run, disposed] = lines().map((l) => JSON.parse(l));
      assert.match(run.error, expected(fault, at), `${fault} at ${at}`);
      assert.ok(run.ms < BOUND[fault], `${fault} at ${at}: rejected after ${run.ms} ms`);
      assert.match(
        run.error,
        /; rank 1's worker thread could not be ended \(.*\): it runs on until this process exits, which it does not prevent; .*rankGroup: "subprocess"/,
      );
      assert.equal(disposed.disposed, true);
      assert.equal(status?.code, 0, "the script ended by itself, its held thread with it");
    }
  };
  // The four places of one fault at once, each in its own process.
  for (const fault of ["block", "loop"] as const) {
    await Promise.all(PLACES.map((at) => one(fault, at)));
  }
});
