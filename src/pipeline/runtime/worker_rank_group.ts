/**
 * One Deno worker per rank: a {@linkcode RankGroup} whose ranks each run
 * their action list in their own thread, tensors moving over MessagePorts
 * and control over a BroadcastChannel, with a watchdog that fails fast when
 * a rank throws, exits, stops sending heartbeats or stops making progress.
 *
 * @module
 */

import type { Schedule } from "../schedule/schedule.ts";
import { validateSchedule } from "../analysis/validate.ts";
import { createPortMesh } from "../comm/worker_backend.ts";
import { ControlPlane, controlPlaneSettled } from "../comm/control_plane.ts";
import { PipelineWorkerError } from "./pipeline_worker_error.ts";
import type { CallMap, NoCalls } from "./stage_executor.ts";
import type {
  RankGroup,
  RankGroupKind,
  RankGroupRunOptions,
  RankGroupRunResult,
} from "./rank_group.ts";
import { liveCount, startWorker, type TrackedWorker } from "./_worker_registry.ts";
import { threadAlive, waitForThreadsToExit } from "./_threads.ts";
import { Watchdog } from "./_watchdog.ts";
import { checkFaultInjection, type FaultInjection } from "./fault_injection.ts";
import {
  assembleRun,
  checkRunOptions,
  checkValidateSteps,
  type RankShare,
} from "./_run_results.ts";
import {
  ABORT_INDEX,
  boardLength,
  type ErrorReport,
  type FromWorker,
  type ToWorker,
} from "./_protocol.ts";

/** Which executor the workers build. */
export interface ExecutorChoice {
  /** URL of a module that exports `createStageExecutor` (a `StageExecutorFactory`). */
  readonly module: string | URL;
  /**
   * Passed (structured-cloned) to the factory as `init.options`; a function
   * is called on the main thread with each rank to give that rank its own
   * options (e.g. only its chunks' weights).
   */
  readonly options?: unknown;
}

/** Options of {@linkcode WorkerRankGroup.create}. */
export interface WorkerRankGroupOptions {
  /** The schedule every run follows (validated before any worker starts). */
  readonly schedule: Schedule;
  /** Executor of every rank. */
  readonly executor: ExecutorChoice;
  /** How often each worker sends a heartbeat, ms (default 200). */
  readonly heartbeatIntervalMs?: number;
  /**
   * A rank silent this long (ms) once the group is ready is declared hung
   * (default 5000). Heartbeats come from the worker's event loop, so a
   * rank inside an action or step (per the status board) that holds its
   * thread in synchronous compute is silent too: it is not declared hung
   * while its thread is seen using CPU time (Linux /proc), or at all where
   * that cannot be seen. A thread blocked without using CPU (a deadlocked
   * wait) is hung; compute that never ends is left to `stallTimeoutMs`.
   */
  readonly heartbeatTimeoutMs?: number;
  /**
   * During a run, no action starting on any rank for this long (ms) is a
   * stall: a hang that keeps the event loop (and so the heartbeat) alive,
   * e.g. a promise that never settles (default 60 000).
   */
  readonly stallTimeoutMs?: number;
  /** Time allowed for the workers to load and meet (ms, default 30 000). */
  readonly startupTimeoutMs?: number;
  /** A fault to inject (tests), checked before any worker starts. */
  readonly fault?: FaultInjection;
  /** Post-validation of optimizer steps (see `RankRunOptions.validateSteps`; default "off"). */
  readonly validateSteps?: "off" | "skip" | "stop";
}

interface PendingRun {
  readonly firstIteration: number;
  readonly done: (RankShare | undefined)[];
  count: number;
  resolve(r: RankGroupRunResult): void;
  reject(e: Error): void;
}

interface PendingCall {
  readonly method: string;
  resolve(v: unknown): void;
  reject(e: Error): void;
}

// Bound on waiting for terminated workers' threads to exit (about 50 ms
// with a WebGPU device on llvmpipe).
const THREAD_EXIT_TIMEOUT_MS = 2000;
// Wait after terminating workers whose threads cannot be watched.
const UNWATCHED_TEARDOWN_GRACE_MS = 200;

const WORKER_URL = new URL("./stage_worker.ts", import.meta.url).href;

function positive(value: unknown, what: string, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !(v > 0) || !Number.isFinite(v)) {
    throw new RangeError(`${what} must be a positive finite number of ms, got ${value}`);
  }
  return v;
}

/** The timeouts of a worker group, checked and with defaults. */
export interface WorkerGroupTimeouts {
  readonly heartbeatIntervalMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly stallTimeoutMs: number;
  readonly startupTimeoutMs: number;
}

/**
 * Checks a worker group's options before any worker starts (the schedule,
 * the executor choice, the timeouts, the fault, the validation mode) and
 * returns its timeouts.
 */
export function checkWorkerGroupOptions(options: WorkerRankGroupOptions): WorkerGroupTimeouts {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object { schedule, executor, ... }, got ${options}`);
  }
  validateSchedule(options.schedule);
  const ex = options.executor;
  if (ex === null || typeof ex !== "object" || ex.module === undefined) {
    throw new TypeError(
      `executor must be an object { module, options } naming the executor module's URL, got ${
        ex === null || typeof ex !== "object" ? String(ex) : "no module"
      }`,
    );
  }
  const t = {
    heartbeatIntervalMs: positive(options.heartbeatIntervalMs, "heartbeatIntervalMs", 200),
    heartbeatTimeoutMs: positive(options.heartbeatTimeoutMs, "heartbeatTimeoutMs", 5000),
    stallTimeoutMs: positive(options.stallTimeoutMs, "stallTimeoutMs", 60_000),
    startupTimeoutMs: positive(options.startupTimeoutMs, "startupTimeoutMs", 30_000),
  };
  if (t.heartbeatTimeoutMs <= t.heartbeatIntervalMs) {
    throw new RangeError(
      `heartbeatTimeoutMs (${t.heartbeatTimeoutMs}) must exceed heartbeatIntervalMs (${t.heartbeatIntervalMs})`,
    );
  }
  if (options.fault !== undefined) checkFaultInjection(options.fault, "fault");
  checkValidateSteps(options.validateSteps);
  return t;
}

/**
 * Workers currently alive (started by a worker group and not yet
 * terminated). Deno cannot tell whether a worker lives, so the runtime
 * keeps a registry.
 *
 * @example
 * ```ts
 * import { liveWorkerCount } from "@conveyor/core/runtime";
 * console.log(liveWorkerCount()); // 0
 * ```
 */
export function liveWorkerCount(): number {
  return liveCount();
}

/**
 * One Deno worker per rank of a schedule. See {@linkcode RankGroup}: any
 * rank failing, exiting, hanging or stalling rejects the run with a
 * {@linkcode PipelineWorkerError} and terminates every worker (the group is
 * then spent: build a new one). Always `dispose`.
 *
 * @example
 * ```ts
 * import { generateSchedule, WorkerRankGroup } from "@conveyor/core/runtime";
 * import { SYNTHETIC_EXECUTOR_URL } from "@conveyor/core/testing";
 * const group = await WorkerRankGroup.create({
 *   schedule: generateSchedule("1f1b", { ranks: 2, microBatches: 2 }),
 *   executor: { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 1 } },
 * });
 * try {
 *   const r = await group.run({ iterations: 2 });
 *   console.log(r.events.length); // 16
 * } finally {
 *   await group.dispose();
 * }
 * ```
 */
export class WorkerRankGroup<C extends CallMap = NoCalls> implements RankGroup<C> {
  /**
   * Validates the schedule and options, starts the workers, wires the
   * ports and waits until every executor is built.
   */
  static async create<C extends CallMap = NoCalls>(
    options: WorkerRankGroupOptions,
  ): Promise<WorkerRankGroup<C>> {
    checkWorkerGroupOptions(options);
    await controlPlaneSettled();
    const group = new WorkerRankGroup<C>(options);
    try {
      await group.#started;
    } catch (e) {
      await group.dispose();
      throw e;
    }
    return group;
  }

  /** Every rank runs in its own worker. */
  readonly kind: RankGroupKind = "workers";
  /** The schedule the group runs. */
  readonly schedule: Schedule;
  /** Names this group's control channel. */
  readonly runId: string = crypto.randomUUID();
  #workers: TrackedWorker[] = [];
  #control: ControlPlane;
  #board: Int32Array;
  #watchdog: Watchdog;
  #watchTimer: ReturnType<typeof setInterval>;
  #startupTimer: ReturnType<typeof setTimeout> | undefined;
  #started: Promise<void>;
  #ready = 0;
  #startResolve!: () => void;
  #startReject!: (e: Error) => void;
  #failure: Error | null = null;
  #closed = false;
  #nextId = 1;
  #nextIteration = 0;
  #run: PendingRun | null = null;
  #calls = new Map<number, PendingCall>();
  #disposed = new Set<number>();
  #threads: number[] = [];
  #threadOf: (number | undefined)[] = [];
  #stuck: number[] = [];
  #shutdownDone: Promise<void> = Promise.resolve();
  #disposeWait: (() => void) | null = null;

  private constructor(options: WorkerRankGroupOptions) {
    const schedule = options.schedule;
    this.schedule = schedule;
    const p = schedule.ranks;
    const t = checkWorkerGroupOptions(options);
    const hbInterval = t.heartbeatIntervalMs;
    const heartbeatTimeoutMs = t.heartbeatTimeoutMs;
    const stallTimeoutMs = t.stallTimeoutMs;
    const startupMs = t.startupTimeoutMs;
    const ex = options.executor;
    const module = String(ex.module);
    this.#board = new Int32Array(new SharedArrayBuffer(boardLength(p) * 4));
    const watchMs = Math.max(10, Math.min(hbInterval, 250));
    this.#watchdog = new Watchdog(schedule, this.#board, {
      heartbeatTimeoutMs,
      stallTimeoutMs,
      watchMs,
    });
    this.#started = new Promise<void>((resolve, reject) => {
      this.#startResolve = resolve;
      this.#startReject = reject;
    });
    this.#control = new ControlPlane(this.runId, p, {
      onHeartbeat: (r) => this.#watchdog.heartbeat(r, performance.now()),
      onError: (r, report) => this.#fail(this.#fromReport(r, report as unknown as ErrorReport)),
      onAbort: (r, reason) =>
        this.#fail(
          new PipelineWorkerError({ rank: r, kind: "error", detail: `aborted: ${reason}` }),
        ),
    });
    const mesh = createPortMesh(p);
    for (let r = 0; r < p; r++) {
      const tracked = startWorker(WORKER_URL, `conveyor-rank-${r}`);
      this.#workers.push(tracked);
      tracked.worker.onmessage = (e: MessageEvent<FromWorker>) => this.#onMessage(r, e.data);
      tracked.worker.onerror = (e: ErrorEvent) => {
        e.preventDefault();
        this.#fail(this.#watchdog.blame(r, "error", e.message || String(e.error)));
      };
      tracked.worker.onmessageerror = () =>
        this.#fail(this.#watchdog.blame(r, "error", "a message from the worker could not be read"));
      const init: ToWorker = {
        type: "init",
        rank: r,
        runId: this.runId,
        ports: mesh[r],
        schedule,
        executor: {
          module,
          options: typeof ex.options === "function" ? ex.options(r) : ex.options,
        },
        timeOrigin: performance.timeOrigin,
        board: this.#board.buffer as SharedArrayBuffer,
        heartbeatIntervalMs: hbInterval,
        connectTimeoutMs: startupMs,
        ...(options.fault === undefined ? {} : { fault: options.fault }),
        validateSteps: checkValidateSteps(options.validateSteps),
      };
      tracked.worker.postMessage(init, mesh[r].filter((x): x is MessagePort => x !== null));
    }
    // Answers go once every rank has said hello on the control plane.
    void this.#control.rendezvous();
    this.#startupTimer = setTimeout(() => {
      const heard = this.#control.ranksHeard;
      this.#fail(
        new PipelineWorkerError({
          rank: Math.min(heard, p - 1),
          kind: "startup",
          detail: `${this.#ready} of ${p} workers ready (${heard} met) after ${startupMs} ms`,
        }),
      );
    }, startupMs);
    this.#watchTimer = setInterval(() => {
      if (this.#closed || this.#ready < this.ranks) return;
      const failure = this.#watchdog.check(performance.now(), this.#run !== null);
      if (failure !== null) this.#fail(failure);
    }, watchMs);
  }

  /** Number of ranks (workers). */
  get ranks(): number {
    return this.schedule.ranks;
  }

  /** Whether the group was disposed or brought down by a failure. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The failure that brought the group down, or null. */
  get failure(): Error | null {
    return this.#failure;
  }

  /**
   * Runs the schedule for `iterations` iterations back to back: each rank
   * starts its next iteration right after its own last action (each stage
   * steps right after its own last backward), with no barrier between
   * iterations. Iteration indices continue across runs.
   */
  run(options?: RankGroupRunOptions): Promise<RankGroupRunResult> {
    let checked;
    try {
      checked = checkRunOptions(options);
    } catch (e) {
      return Promise.reject(e);
    }
    const unusable = this.#unusable();
    if (unusable !== null) return Promise.reject(unusable);
    if (this.#run !== null) {
      return Promise.reject(new Error("a run is already in progress on this rank group"));
    }
    const id = this.#nextId++;
    const firstIteration = this.#nextIteration;
    this.#nextIteration += checked.iterations;
    return new Promise<RankGroupRunResult>((resolve, reject) => {
      this.#run = {
        firstIteration,
        done: new Array(this.ranks).fill(undefined),
        count: 0,
        resolve,
        reject,
      };
      this.#watchdog.runStarted(performance.now());
      this.#workers.forEach((w, r) => {
        const msg: ToWorker = {
          type: "run",
          id,
          firstIteration,
          iterations: checked.iterations,
          payloads: checked.payloads(r),
          forwardOnly: checked.forwardOnly,
        };
        w.worker.postMessage(msg);
      });
    });
  }

  /** Sends `method` to rank `rank`'s executor (see {@linkcode RankGroup.call}). */
  call<K extends keyof C & string>(
    rank: number,
    method: K,
    args: C[K]["args"],
  ): Promise<C[K]["result"]> {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.ranks) {
      return Promise.reject(new RangeError(`rank must be in [0, ${this.ranks - 1}], got ${rank}`));
    }
    const unusable = this.#unusable();
    if (unusable !== null) return Promise.reject(unusable);
    const id = this.#nextId++;
    return new Promise<C[K]["result"]>((resolve, reject) => {
      this.#calls.set(id, { method, resolve: resolve as (v: unknown) => void, reject });
      const msg: ToWorker = { type: "call", id, method, args };
      this.#workers[rank].worker.postMessage(msg);
    });
  }

  /**
   * Ends every worker: asks each to dispose its executor (up to `graceMs`,
   * default 2000), terminates all of them and (where the OS tells: Linux,
   * with read access to /proc) waits for their threads to exit. Idempotent;
   * pending runs and calls reject. Rejects, naming the ranks, when a worker
   * thread could not be ended (see {@linkcode WorkerRankGroup.stuckRanks}).
   */
  async dispose(graceMs = 2000): Promise<void> {
    if (this.#closed) {
      await this.#shutdownDone;
      return this.#throwIfStuck();
    }
    this.#closed = true;
    clearTimeout(this.#startupTimer);
    clearInterval(this.#watchTimer);
    const live = this.#workers.filter((w) => !w.closed);
    if (live.length > 0 && this.#ready === this.ranks) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#disposeWait = () => {
          if (this.#disposed.size === this.ranks) resolve();
        };
        timer = setTimeout(resolve, graceMs);
        for (const w of live) w.worker.postMessage({ type: "dispose" } satisfies ToWorker);
      });
      clearTimeout(timer);
    }
    this.#shutdownDone = this.#shutdown(new Error("the worker rank group was disposed"));
    await this.#shutdownDone;
    this.#throwIfStuck();
  }

  /**
   * Ranks whose worker thread outlived the group's end (a synchronous loop
   * or a blocking wait in their code, which Deno cannot stop); empty where
   * every thread ended or threads cannot be watched.
   */
  get stuckRanks(): readonly number[] {
    return this.#stuck;
  }

  #throwIfStuck(): void {
    if (this.#stuck.length === 0) return;
    const which = this.#stuck.length === 1
      ? `rank ${this.#stuck[0]}'s worker thread`
      : `the worker threads of ranks ${this.#stuck.join(", ")}`;
    throw new Error(
      `${which} could not be ended: its code holds the thread (a synchronous loop or a ` +
        "blocking wait), which Deno cannot stop, so this process will not exit by itself. " +
        'End it with Deno.exit(), or run the ranks in a subprocess (rankGroup: "subprocess"), ' +
        "which can always be ended.",
    );
  }

  #unusable(): Error | null {
    if (this.#failure !== null) {
      return new Error(`the rank group failed and is closed: ${this.#failure.message}`, {
        cause: this.#failure,
      });
    }
    if (this.#closed) return new Error("the worker rank group was disposed");
    return null;
  }

  #onMessage(rank: number, msg: FromWorker): void {
    switch (msg.type) {
      case "ready":
        if (msg.thread !== undefined) this.#threads.push(msg.thread);
        this.#threadOf[rank] = msg.thread;
        this.#watchdog.setThread(rank, msg.thread);
        if (++this.#ready === this.ranks) {
          clearTimeout(this.#startupTimer);
          // Heartbeats count from here on: the startup timeout covered loading.
          this.#watchdog.arm(performance.now());
          this.#startResolve();
        }
        break;
      case "done": {
        const run = this.#run;
        if (run === null || run.done[rank] !== undefined) return;
        run.done[rank] = { events: msg.events, reports: msg.reports, rolledBack: msg.rolledBack };
        if (++run.count === this.ranks) {
          this.#run = null;
          run.resolve(assembleRun(this.ranks, run.firstIteration, run.done as RankShare[]));
        }
        break;
      }
      case "result": {
        const call = this.#calls.get(msg.id);
        this.#calls.delete(msg.id);
        call?.resolve(msg.value);
        break;
      }
      case "failed": {
        const call = msg.id === undefined ? undefined : this.#calls.get(msg.id);
        if (call !== undefined) {
          this.#calls.delete(msg.id!);
          call.reject(
            new PipelineWorkerError({
              rank,
              kind: "error",
              detail: `call "${call.method}" failed: ${msg.report.detail}`,
            }),
          );
        } else {
          const err = this.#fromReport(rank, msg.report);
          this.#fail(
            this.#ready < this.ranks
              ? new PipelineWorkerError({ rank, kind: "startup", detail: msg.report.detail })
              : err,
          );
        }
        break;
      }
      case "disposed":
        this.#disposed.add(rank);
        this.#disposeWait?.();
        break;
    }
  }

  #fromReport(rank: number, report: ErrorReport): PipelineWorkerError {
    if (report.action !== undefined) {
      return new PipelineWorkerError({
        rank,
        kind: "error",
        action: report.action,
        iteration: report.iteration,
        ...(report.between ? { between: true } : {}),
        detail: report.detail,
        workerStack: report.stack,
      });
    }
    return this.#watchdog.blame(rank, "error", report.detail, report.stack);
  }

  #fail(error: Error): void {
    if (this.#failure !== null || this.#closed) return;
    this.#failure = error;
    this.#closed = true;
    this.#shutdownDone = this.#shutdown(error);
  }

  // Wakes blocked executors, aborts the control plane and terminates every
  // worker; pending operations reject once the channel has settled, so that
  // nothing of the group is left running when a caller sees the error.
  async #shutdown(error: Error): Promise<void> {
    clearTimeout(this.#startupTimer);
    clearInterval(this.#watchTimer);
    Atomics.store(this.#board, ABORT_INDEX, 1);
    Atomics.notify(this.#board, ABORT_INDEX);
    this.#control.abort(error.message);
    for (const w of this.#workers) w.terminate();
    await this.#control.close();
    // A terminated worker still tears down its native state (V8 heap,
    // WebGPU device, Mesa's EGL display) on its own thread; a process that
    // exits meanwhile can crash (heap corruption, EGL BadDisplay), so the
    // group is done only once those threads are gone.
    const watched = this.#threads.length === this.#workers.length &&
      await waitForThreadsToExit(this.#threads, THREAD_EXIT_TIMEOUT_MS);
    // A thread held by a synchronous loop or a blocking wait in user code
    // survives terminate(): name its rank.
    this.#stuck = this.#threadOf.flatMap((t, r) => t !== undefined && threadAlive(t) ? [r] : []);
    // Without /proc (other systems, or no read permission) the threads cannot
    // be watched: a fixed grace covers the measured ~50 ms teardown instead.
    if (!watched && this.#workers.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, UNWATCHED_TEARDOWN_GRACE_MS));
    }
    this.#startReject(error);
    this.#started.catch(() => {});
    const run = this.#run;
    this.#run = null;
    run?.reject(error);
    for (const c of this.#calls.values()) c.reject(error);
    this.#calls.clear();
  }
}
