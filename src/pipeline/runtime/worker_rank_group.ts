/**
 * One Deno worker per rank: a {@linkcode RankGroup} whose ranks each run
 * their action list in their own thread, tensors moving over MessagePorts
 * and control over a BroadcastChannel, with a watchdog that fails fast when
 * a rank throws, exits, stops its heartbeats (a counter on the shared status
 * board that a timer on its event loop advances) or stops making progress.
 *
 * The workers and the control channel keep the process alive only while a
 * startup, run, call or dispose is pending: between calls they are unref'd
 * (`node:worker_threads`' `unref()`, which Deno's web `Worker` lacks), so a
 * script that forgets to dispose its group still exits when its own work is
 * done (the workers then end with the process).
 *
 * @module
 */

import {
  type CheckedWorkerGroup,
  checkWorkerGroupOptions,
  type WorkerRankGroupOptions,
} from "./worker_group_options.ts";

export type { ExecutorChoice, WorkerRankGroupOptions } from "./worker_group_options.ts";
export { checkWorkerGroupOptions } from "./worker_group_options.ts";
import { createPortMesh } from "../comm/worker_backend.ts";
import { ControlPlane, controlPlaneSettled } from "../comm/control_plane.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";
import type { CallMap, NoCalls } from "./rank_executor.ts";
import type { RankGroupKind, RankGroupRunOptions, RankGroupRunResult } from "./rank_group.ts";
import { startWorker, type TrackedWorker } from "./_worker_registry.ts";
import { threadAlive, waitForThreadsToExit } from "./_threads.ts";
import { Watchdog } from "./_watchdog.ts";
import { assembleRun, checkRunOptions, type RankShare } from "./_run_results.ts";
import { optionsFor } from "./_placement.ts";
import { RankGroupBase } from "./_rank_group_base.ts";
import {
  ABORT_INDEX,
  boardLength,
  type ErrorReport,
  type FromWorker,
  type ToWorker,
} from "./_protocol.ts";

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
const DISPOSED = "the worker rank group was disposed";

/**
 * One Deno worker per rank of a schedule. See {@linkcode RankGroup}: any
 * rank failing, exiting, hanging or stalling rejects the run with a
 * {@linkcode PipelineRankError} and terminates every worker (the group is
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
export class WorkerRankGroup<C extends CallMap = NoCalls> extends RankGroupBase<C> {
  /**
   * Validates the schedule and options, starts the workers, wires the
   * ports and waits until every executor is built.
   */
  static async create<C extends CallMap = NoCalls>(
    options: WorkerRankGroupOptions,
  ): Promise<WorkerRankGroup<C>> {
    const checked = checkWorkerGroupOptions(options);
    await controlPlaneSettled();
    const group = new WorkerRankGroup<C>(options, checked);
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
  #nextId = 1;
  #run: PendingRun | null = null;
  #calls = new Map<number, PendingCall>();
  #disposed = new Set<number>();
  #threads: number[] = [];
  #threadOf: (number | undefined)[] = [];
  #stuck: number[] = [];
  #shutdownDone: Promise<void> = Promise.resolve();
  #disposeWait: (() => void) | null = null;
  #holds = 0;

  private constructor(options: WorkerRankGroupOptions, t: CheckedWorkerGroup) {
    super(t.schedule, DISPOSED, t.replicas);
    const schedule = t.schedule;
    // Every rank of every replica: D·P workers.
    const p = schedule.ranks * t.replicas;
    const hbInterval = t.heartbeatIntervalMs;
    const heartbeatTimeoutMs = t.hungAfterMs;
    const stallTimeoutMs = t.stalledAfterMs;
    const startupMs = t.startupTimeoutMs;
    const ex = options.executor;
    const module = String(ex.module);
    this.#board = new Int32Array(new SharedArrayBuffer(boardLength(p) * 4));
    const watchMs = Math.max(10, Math.min(hbInterval, 250));
    this.#watchdog = new Watchdog(schedule, this.#board, {
      heartbeatTimeoutMs,
      stallTimeoutMs,
      watchMs,
    }, t.replicas);
    this.#started = new Promise<void>((resolve, reject) => {
      this.#startResolve = resolve;
      this.#startReject = reject;
    });
    this.#control = new ControlPlane(this.runId, p, {
      onHeartbeat: (r) => this.#watchdog.heartbeat(r, performance.now()),
      onError: (r, report) => this.#fail(this.#fromReport(r, report as unknown as ErrorReport)),
      onAbort: (r, reason) =>
        this.#fail(
          new PipelineRankError({ rank: r, kind: "error", detail: `aborted: ${reason}` }),
        ),
    });
    const mesh = createPortMesh(p);
    try {
      this.#startWorkers(options, t, mesh, module);
    } catch (e) {
      // A worker that cannot start (Deno refusing to read its module): nothing stays open.
      for (const w of this.#workers) w.terminate();
      for (const ports of mesh) for (const port of ports) port?.close();
      void this.#control.close();
      throw e;
    }
    // Answers go once every rank has said hello on the control plane.
    void this.#control.rendezvous();
    // The workers keep the process alive only while something waits on them.
    this.#hold(this.#started);
    this.#startupTimer = setTimeout(() => {
      const heard = this.#control.ranksHeard;
      this.#fail(
        new PipelineRankError({
          rank: Math.min(heard, p - 1),
          kind: "startup",
          detail: `${this.#ready} of ${p} workers ready (${heard} met) after ${startupMs} ms`,
        }),
      );
    }, startupMs);
    this.#watchTimer = setInterval(() => {
      if (this.isClosed || this.#ready < this.ranks) return;
      const failure = this.#watchdog.check(performance.now(), this.#run !== null);
      if (failure !== null) this.#fail(failure);
    }, watchMs);
    // Held workers keep the process alive while these matter.
    Deno.unrefTimer(this.#startupTimer as unknown as number);
    Deno.unrefTimer(this.#watchTimer as unknown as number);
  }

  /** Starts one worker per rank and sends it its init message. */
  #startWorkers(
    options: WorkerRankGroupOptions,
    t: CheckedWorkerGroup,
    mesh: ReturnType<typeof createPortMesh>,
    module: string,
  ): void {
    const schedule = t.schedule;
    const ex = options.executor;
    for (let r = 0; r < this.ranks; r++) {
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
          options: optionsFor(ex.options, r),
        },
        timeOrigin: performance.timeOrigin,
        board: this.#board.buffer as SharedArrayBuffer,
        heartbeatIntervalMs: t.heartbeatIntervalMs,
        connectTimeoutMs: t.startupTimeoutMs,
        policy: t.policy,
        replicas: t.replicas,
        shardOptimizer: t.shardOptimizer,
      };
      tracked.worker.postMessage(init, mesh[r].filter((x): x is MessagePort => x !== null));
    }
  }

  /**
   * Refs the workers and the control channel until `pending` settles: a
   * group keeps the process alive only while a startup, run, call or
   * dispose is pending, so that a script that never disposes still exits.
   */
  #hold<T>(pending: Promise<T>): Promise<T> {
    if (this.#holds++ === 0) this.#setRef(true);
    const release = () => {
      if (--this.#holds === 0) this.#setRef(false);
    };
    pending.then(release, release);
    return pending;
  }

  #setRef(on: boolean): void {
    for (const w of this.#workers) {
      if (on) w.ref();
      else w.unref();
    }
    if (on) this.#control.ref();
    else this.#control.unref();
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
    const unusable = this.unusable();
    if (unusable !== null) return Promise.reject(unusable);
    if (this.#run !== null) {
      return Promise.reject(new Error("a run is already in progress on this rank group"));
    }
    const id = this.#nextId++;
    const firstIteration = this.takeIterations(checked.iterations);
    return this.#hold(
      new Promise<RankGroupRunResult>((resolve, reject) => {
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
      }),
    );
  }

  // Sends the call to the rank's worker (also while a run is in progress).
  /** @ignore */
  protected answer(rank: number, method: keyof C & string, args: unknown): Promise<unknown> {
    const id = this.#nextId++;
    return this.#hold(
      new Promise<unknown>((resolve, reject) => {
        this.#calls.set(id, { method, resolve, reject });
        const msg: ToWorker = { type: "call", id, method, args };
        this.#workers[rank].worker.postMessage(msg);
      }),
    );
  }

  /**
   * Ends every worker: asks each to dispose its executor (up to `graceMs`,
   * default 2000), terminates all of them and (where the OS tells: Linux,
   * with read access to /proc) waits for their threads to exit. Idempotent;
   * pending runs and calls reject.
   */
  async dispose(graceMs = 2000): Promise<void> {
    if (this.isClosed) return await this.#shutdownDone;
    let release!: () => void;
    this.#hold(new Promise<void>((resolve) => release = resolve));
    try {
      await this.#dispose(graceMs);
    } finally {
      release();
    }
  }

  async #dispose(graceMs: number): Promise<void> {
    this.isClosed = true;
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
    this.#shutdownDone = this.#shutdown(new Error(DISPOSED));
    await this.#shutdownDone;
  }

  /**
   * Ranks whose worker thread outlived the group's end (a synchronous loop
   * or a blocking wait in their code, which Deno cannot stop): such a
   * thread runs on until the process exits, which it no longer prevents.
   * Empty where every thread ended or threads cannot be watched.
   */
  get stuckRanks(): readonly number[] {
    return this.#stuck;
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
        run.done[rank] = {
          events: msg.events,
          reports: msg.reports,
          rolledBack: msg.rolledBack,
          gradNorms: msg.gradNorms,
        };
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
            new PipelineRankError({
              rank,
              kind: "error",
              detail: `call "${call.method}" failed: ${msg.report.detail}`,
            }),
          );
        } else {
          const err = this.#fromReport(rank, msg.report);
          this.#fail(
            this.#ready < this.ranks
              ? new PipelineRankError({ rank, kind: "startup", detail: msg.report.detail })
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

  #fromReport(rank: number, report: ErrorReport): PipelineRankError {
    if (report.action !== undefined) {
      return new PipelineRankError({
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
    if (this.failedWith !== null || this.isClosed) return;
    this.failedWith = error;
    this.isClosed = true;
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
    const watched = await waitForThreadsToExit(this.#threads, THREAD_EXIT_TIMEOUT_MS);
    // Without /proc (other systems, or no read permission), or for workers
    // that never said which thread they run on, a fixed grace covers the
    // measured ~50 ms teardown instead.
    if ((!watched || this.#threads.length < this.#workers.length) && this.#workers.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, UNWATCHED_TEARDOWN_GRACE_MS));
    }
    // A thread held by a synchronous loop or a blocking wait in user code
    // survives terminate(): the failure names its rank.
    this.#stuck = this.#threadOf.flatMap((t, r) => t !== undefined && threadAlive(t) ? [r] : []);
    if (this.#stuck.length > 0 && error === this.failedWith) {
      error.message += `; ${
        this.#stuck.length === 1
          ? `rank ${this.#stuck[0]}'s worker thread`
          : `the worker threads of ranks ${this.#stuck.join(", ")}`
      } could not be ended (its code holds the thread in a loop or a blocking wait, which ` +
        "Deno cannot stop): it runs on until this process exits, which it does not prevent; " +
        'ranks in a subprocess (rankGroup: "subprocess") are ended at once';
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
