/**
 * Worker entry of the pipeline runtime: one per rank, started by
 * {@linkcode WorkerRankGroup}. It joins the run's control plane and data
 * ports ({@linkcode WorkerBackend}), builds its executor (the
 * `createRankExecutor` export of the given module), runs its rank's
 * action list on request, reports errors on the control plane and writes its
 * state to the shared status board for the pool's watchdog.
 *
 * Not meant to be imported: the group starts it as a `node:worker_threads`
 * worker (a Deno worker that can be unref'd) from
 * `new URL("./stage_worker.ts", import.meta.url)`.
 *
 * @module
 */

import { CommAbortedError } from "../comm/backend.ts";
import { WorkerBackend } from "../comm/worker_backend.ts";
import type { Schedule } from "../schedule/schedule.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";
import type { CallMap, RankExecutor, RankExecutorFactory } from "./rank_executor.ts";
import { runRank } from "./rank_interpreter.ts";
import { executorInit } from "./_placement.ts";
import { checkRunPolicy, type RunPolicy } from "./run_policy.ts";
import type { CommBackend } from "../comm/backend.ts";
import { GradientSync, gridPlace, inGrid, ReplicaComm } from "./gradient_sync.ts";
import {
  ABORT_INDEX,
  beat,
  type ErrorReport,
  type FromWorker,
  type STATE_CODES,
  type ToWorker,
  writeSlot,
} from "./_protocol.ts";

interface WorkerScope {
  onmessage: ((e: MessageEvent<ToWorker>) => void) | null;
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;

let rank = -1;
let schedule: Schedule | null = null;
let comm: WorkerBackend | null = null;
// This replica's pipeline (rank `pipelineRank`, the view of `comm`) and the
// gradient average across replicas (data parallelism; null with one replica).
let pipelineRank = -1;
let replica = 0;
let view: CommBackend | null = null;
let sync: GradientSync | null = null;
let executor: RankExecutor<CallMap> | null = null;
let board: Int32Array | null = null;
let heartbeat: ReturnType<typeof setInterval> | undefined;
let policy: RunPolicy = checkRunPolicy(undefined);
let clock: () => number = () => performance.now();
const controller = new AbortController();

function report(e: unknown): ErrorReport {
  const err = e instanceof Error ? e : new Error(String(e));
  const base = {
    type: "error" as const,
    rank,
    name: err.name,
    message: err.message,
    stack: err.stack,
  };
  if (err instanceof PipelineRankError) {
    return {
      ...base,
      detail: err.detail,
      action: err.action,
      iteration: err.iteration,
      ...(err.between ? { between: true } : {}),
    };
  }
  return { ...base, detail: `${err.name === "Error" ? "" : `${err.name}: `}${err.message}` };
}

// The OS thread running this worker, where /proc tells it (Linux) and it
// may be read without a prompt: the worker's native teardown (its V8 heap,
// its WebGPU instance and device) runs on that thread after the worker
// is terminated, and only the thread's exit says it is over.
function osThreadId(): number | undefined {
  const path = "/proc/thread-self";
  try {
    if (Deno.permissions.querySync({ name: "read", path }).state !== "granted") return undefined;
    const tid = Number(Deno.readLinkSync(path).split("/").pop());
    return Number.isInteger(tid) && tid > 0 ? tid : undefined;
  } catch {
    return undefined;
  }
}

// What the rank is doing now, to name it when an error comes from nowhere.
let current: { state: keyof typeof STATE_CODES; index: number; iteration: number } | null = null;

// Whether a run is in progress (its actions write the rank's state).
let inRun = false;

// Set when an unhandled rejection failed the run: its result is not reported.
let rejected = false;

function setState(state: keyof typeof STATE_CODES, index: number, iteration: number): void {
  if (state === "compute" || state === "step" || state === "recv") {
    current = { state, index, iteration };
  }
  if (board !== null) writeSlot(board, rank, state, index, iteration);
}

async function handle(msg: ToWorker): Promise<void> {
  switch (msg.type) {
    case "init": {
      try {
        rank = msg.rank;
        schedule = msg.schedule;
        board = new Int32Array(msg.board);
        policy = checkRunPolicy(msg.policy);
        // Event times on the main thread's performance.now() scale.
        const offset = performance.timeOrigin - msg.timeOrigin;
        clock = () => performance.now() + offset;
        const P = schedule.ranks;
        ({ replica, pipelineRank } = gridPlace(rank, P));
        // Heartbeats go on the board, not the control channel (see BEAT).
        comm = await WorkerBackend.connect({
          rank,
          size: P * msg.replicas,
          runId: msg.runId,
          ports: msg.ports,
          heartbeatIntervalMs: 0,
        }, { timeoutMs: msg.connectTimeoutMs });
        const beats = board;
        beat(beats, rank);
        heartbeat = setInterval(() => beat(beats, rank), msg.heartbeatIntervalMs);
        const factory: RankExecutorFactory<CallMap> =
          (await import(msg.executor.module)).createRankExecutor;
        if (typeof factory !== "function") {
          throw new TypeError(
            `executor module ${msg.executor.module} must export a function createRankExecutor`,
          );
        }
        view = msg.replicas === 1 ? comm : new ReplicaComm(comm, replica, P);
        sync = msg.replicas === 1 ? null : new GradientSync({
          comm,
          replicas: msg.replicas,
          pipelineRanks: P,
          shardOptimizer: msg.shardOptimizer,
        });
        executor = await factory(executorInit(schedule, pipelineRank, {
          options: msg.executor.options,
          abortFlag: board.subarray(ABORT_INDEX, ABORT_INDEX + 1),
          signal: controller.signal,
          comm: view,
        }));
        scope.postMessage({ type: "ready", thread: osThreadId() });
      } catch (e) {
        scope.postMessage({ type: "failed", report: report(e) });
      }
      break;
    }
    case "run": {
      inRun = true;
      try {
        rejected = false;
        const r = await runRank({
          schedule: schedule!,
          rank: pipelineRank,
          comm: view!,
          ...(sync === null ? {} : { gradientSync: sync }),
          executor: executor!,
          firstIteration: msg.firstIteration,
          iterations: msg.iterations,
          payloads: msg.payloads,
          forwardOnly: msg.forwardOnly,
          clock,
          onState: setState,
          abortFlag: board!.subarray(ABORT_INDEX, ABORT_INDEX + 1),
          policy,
        });
        // A rejection left unhandled by the last action surfaces now, not after "done".
        await new Promise((resolve) => setTimeout(resolve, 0));
        if (rejected) return;
        scope.postMessage({
          type: "done",
          id: msg.id,
          events: sync === null ? r.events : r.events.map((e) => ({ ...e, rank })),
          reports: r.reports,
          rolledBack: r.rolledBack,
          gradNorms: r.gradNorms,
        });
      } catch (err) {
        const e = sync === null ? err : inGrid(err, replica, schedule!.ranks);
        controller.abort(e);
        // An abort means another rank (or the pool) failed first and has reported it.
        if (e instanceof CommAbortedError || comm === null) return;
        comm.reportError({ ...report(e) });
      } finally {
        inRun = false;
      }
      break;
    }
    case "call": {
      try {
        const handler = executor?.calls?.[msg.method];
        if (typeof handler !== "function") {
          throw new TypeError(`the executor of rank ${rank} answers no call "${msg.method}"`);
        }
        // A call works as an action does (loading a large model's weights, a
        // stage's forward): the watchdog then judges the thread by its CPU,
        // not by heartbeats its busy thread cannot send.
        const mark = board !== null && !inRun;
        if (mark) writeSlot(board!, rank, "compute", -1, 0);
        let value;
        try {
          value = await handler(msg.args);
        } finally {
          if (mark && !inRun) writeSlot(board!, rank, "idle", -1, 0);
        }
        scope.postMessage({ type: "result", id: msg.id, value });
      } catch (e) {
        scope.postMessage({ type: "failed", id: msg.id, report: report(e) });
      }
      break;
    }
    case "dispose": {
      try {
        await executor?.dispose?.();
      } finally {
        clearInterval(heartbeat);
        comm?.close();
        scope.postMessage({ type: "disposed" });
        scope.close();
      }
      break;
    }
  }
}

scope.onmessage = (e: MessageEvent<ToWorker>) => {
  void handle(e.data);
};

// A promise rejected with nobody to handle it would end the worker with a
// bare error; report it against the action running when it surfaced.
globalThis.addEventListener("unhandledrejection", (e: PromiseRejectionEvent) => {
  e.preventDefault();
  rejected = true;
  const reason = e.reason instanceof Error ? e.reason.message : String(e.reason);
  const action = current !== null && schedule !== null
    ? schedule.actions[pipelineRank]?.[current.index]
    : undefined;
  const err = new PipelineRankError({
    rank,
    kind: "error",
    ...(action === undefined ? {} : { action, iteration: current!.iteration }),
    between: current?.state === "step",
    detail: `unhandled promise rejection: ${reason}`,
  });
  controller.abort(err);
  if (comm !== null) comm.reportError({ ...report(err) });
  else scope.postMessage({ type: "failed", report: report(err) });
});
