/**
 * The worker-based pipeline executor: one Deno worker per rank, each running
 * its rank's action list from a schedule, with a watchdog that fails fast
 * when a rank throws, stops sending heartbeats or stops making progress.
 *
 * @module
 */

import { formatAction } from "../schedule/action.ts";
import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import { validateSchedule } from "../analysis/validate.ts";
import { createPortMesh } from "../comm/worker_backend.ts";
import { ControlPlane, controlPlaneSettled } from "../comm/_control_plane.ts";
import { type PipelineFailure, PipelineWorkerError } from "./pipeline_worker_error.ts";
import { summarizeTimeline, type TimelineSummary } from "../analysis/timeline_summary.ts";
import {
  liveCount,
  startWorker,
  type TrackedWorker,
  waitForThreadsToExit,
} from "./_worker_registry.ts";
import {
  ABORT_INDEX,
  boardLength,
  type ErrorReport,
  type FromWorker,
  INDEX,
  ITERATION,
  PROGRESS,
  SLOT_BASE,
  SLOT_SIZE,
  STATE,
  STATE_CODES,
  type ToWorker,
} from "./_protocol.ts";

/** Which executor the workers build. */
export interface ExecutorChoice {
  /**
   * URL of a module that exports `createStageExecutor` (a
   * `StageExecutorFactory`); absent: the synthetic executor.
   */
  readonly module?: string | URL;
  /**
   * Passed (structured-cloned) to the factory as `init.options`; a function
   * is called on the main thread with each rank to give that rank its own
   * options (e.g. only its chunks' weights).
   */
  readonly options?: unknown;
}

/** Options of {@linkcode PipelineWorkerPool.create}. */
export interface PipelineWorkerPoolOptions {
  /** The schedule every run follows (validated before any worker starts). */
  readonly schedule: Schedule;
  /** Executor of every rank (default: synthetic with its defaults). */
  readonly executor?: ExecutorChoice;
  /** How often each worker sends a heartbeat, ms (default 200). */
  readonly heartbeatIntervalMs?: number;
  /**
   * A rank silent this long (ms) once the pool is ready is declared hung
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
}

/** Options of {@linkcode PipelineWorkerPool.run}. */
export interface PipelineRunOptions {
  /** Iterations back to back, with no barrier between them (default 1). */
  readonly iterations?: number;
  /** Payload for `executor.beginIteration` of `rank` in its `index`-th iteration of this run. */
  readonly payload?: (rank: number, index: number) => unknown;
  /**
   * Run only the forward actions of each rank's list, without optimizer
   * steps (prediction); the executor sees `ctx.forwardOnly`.
   */
  readonly forwardOnly?: boolean;
}

/** What a run reports; times in ms from the run's first action start. */
export interface PipelineRunResult extends TimelineSummary {
  /** Index of this run's first iteration (iterations count on across runs). */
  readonly firstIteration: number;
  /** Every action of every rank, sorted by start then rank. */
  readonly events: readonly TimedEvent[];
  /** `reports[rank][i]`: the executor's `endIteration` value for the run's i-th iteration. */
  readonly reports: readonly (readonly unknown[])[];
  /** `performance.now()` on the main thread at the run's time 0. */
  readonly startTime: number;
}

interface PendingRun {
  readonly firstIteration: number;
  readonly done: ({ events: TimedEvent[]; reports: unknown[] } | undefined)[];
  count: number;
  resolve(r: PipelineRunResult): void;
  reject(e: Error): void;
}

interface PendingCall {
  readonly rank: number;
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
  if (typeof v !== "number" || !(v > 0)) {
    throw new RangeError(`${what} must be a positive number of ms, got ${value}`);
  }
  return v;
}

// CPU time (user + system, in clock ticks) of this process's thread `tid`
// from /proc (Linux); undefined where it cannot be read. A worker held in
// synchronous compute uses CPU; one blocked in a wait does not.
function threadCpuTicks(tid: number | undefined): number | undefined {
  if (tid === undefined) return undefined;
  try {
    const stat = Deno.readTextFileSync(`/proc/self/task/${tid}/stat`);
    // Fields after the parenthesised name: state, ppid, …; utime and stime
    // are fields 14 and 15 of the line, 12th and 13th after the name.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(f[11]) + Number(f[12]);
    return Number.isFinite(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Workers currently alive (started by a pool and not yet terminated). Deno
 * cannot tell whether a worker lives, so the runtime keeps a registry.
 *
 * @example
 * ```ts
 * import { liveWorkerCount } from "@conveyor/core";
 * console.log(liveWorkerCount()); // 0
 * ```
 */
export function liveWorkerCount(): number {
  return liveCount();
}

/**
 * One Deno worker per rank of a schedule, connected by MessagePorts (data)
 * and a BroadcastChannel (control). `run` executes the schedule for some
 * iterations and measures it; any rank failing, hanging or stalling rejects
 * the run with a {@linkcode PipelineWorkerError} and terminates every
 * worker (the pool is then spent: build a new one). Always `dispose`.
 *
 * @example
 * ```ts
 * import { generateSchedule, PipelineWorkerPool } from "@conveyor/core";
 * const pool = await PipelineWorkerPool.create({
 *   schedule: generateSchedule("1f1b", { ranks: 2, microBatches: 2 }),
 *   executor: { options: { ms: 1 } },
 * });
 * try {
 *   const r = await pool.run({ iterations: 2 });
 *   console.log(r.events.length); // 16
 * } finally {
 *   await pool.dispose();
 * }
 * ```
 */
export class PipelineWorkerPool {
  /**
   * Validates the schedule and options, starts the workers, wires the
   * ports and waits until every executor is built.
   */
  static async create(options: PipelineWorkerPoolOptions): Promise<PipelineWorkerPool> {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`options must be an object { schedule, ... }, got ${options}`);
    }
    validateSchedule(options.schedule);
    await controlPlaneSettled();
    const pool = new PipelineWorkerPool(options);
    try {
      await pool.#started;
    } catch (e) {
      await pool.dispose();
      throw e;
    }
    return pool;
  }

  /** The schedule the pool runs. */
  readonly schedule: Schedule;
  /** Names this pool's control channel. */
  readonly runId: string = crypto.randomUUID();
  #workers: TrackedWorker[] = [];
  #control: ControlPlane;
  #board: Int32Array;
  #heartbeatTimeoutMs: number;
  #stallTimeoutMs: number;
  #lastHeartbeat: number[];
  // Per rank: its worker's OS thread id (where /proc tells it), the CPU time
  // (clock ticks) last read for it while it was silent, and when that last
  // grew: a silent rank that computes is not hung.
  #threadOf: (number | undefined)[];
  #cpuTicks: (number | undefined)[];
  #lastCpuAt: number[];
  #watchMs: number;
  #lastProgress = -1;
  #lastProgressAt = 0;
  #watchdog: ReturnType<typeof setInterval>;
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
  #shutdownDone: Promise<void> = Promise.resolve();
  #disposeWait: (() => void) | null = null;

  private constructor(options: PipelineWorkerPoolOptions) {
    const schedule = options.schedule;
    this.schedule = schedule;
    const p = schedule.ranks;
    const hbInterval = positive(options.heartbeatIntervalMs, "heartbeatIntervalMs", 200);
    this.#heartbeatTimeoutMs = positive(options.heartbeatTimeoutMs, "heartbeatTimeoutMs", 5000);
    this.#stallTimeoutMs = positive(options.stallTimeoutMs, "stallTimeoutMs", 60_000);
    const startupMs = positive(options.startupTimeoutMs, "startupTimeoutMs", 30_000);
    if (this.#heartbeatTimeoutMs <= hbInterval) {
      throw new RangeError(
        `heartbeatTimeoutMs (${this.#heartbeatTimeoutMs}) must exceed heartbeatIntervalMs (${hbInterval})`,
      );
    }
    const ex = options.executor ?? {};
    const module = ex.module === undefined ? undefined : String(ex.module);
    this.#board = new Int32Array(new SharedArrayBuffer(boardLength(p) * 4));
    this.#lastHeartbeat = new Array<number>(p).fill(Infinity);
    this.#threadOf = new Array<number | undefined>(p).fill(undefined);
    this.#cpuTicks = new Array<number | undefined>(p).fill(undefined);
    this.#lastCpuAt = new Array<number>(p).fill(-Infinity);
    this.#watchMs = Math.max(10, Math.min(hbInterval, 250));
    this.#started = new Promise<void>((resolve, reject) => {
      this.#startResolve = resolve;
      this.#startReject = reject;
    });
    this.#control = new ControlPlane(this.runId, p, {
      onHeartbeat: (r) => {
        if (r >= 0 && r < p && this.#ready === p) this.#lastHeartbeat[r] = performance.now();
      },
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
        this.#fail(this.#blame(r, "error", e.message || String(e.error)));
      };
      tracked.worker.onmessageerror = () =>
        this.#fail(this.#blame(r, "error", "a message from the worker could not be read"));
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
    this.#watchdog = setInterval(() => this.#check(), this.#watchMs);
  }

  /** Number of ranks (workers). */
  get ranks(): number {
    return this.schedule.ranks;
  }

  /** Whether the pool was disposed or brought down by a failure. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The failure that brought the pool down, or null. */
  get failure(): Error | null {
    return this.#failure;
  }

  /**
   * Runs the schedule for `iterations` iterations back to back: each rank
   * starts its next iteration right after its own last action (each stage
   * steps right after its own last backward), with no barrier between
   * iterations. Iteration indices continue across runs.
   */
  run(options: PipelineRunOptions = {}): Promise<PipelineRunResult> {
    const iterations = options.iterations ?? 1;
    if (!Number.isInteger(iterations) || iterations < 1) {
      return Promise.reject(
        new RangeError(`iterations must be a positive integer, got ${iterations}`),
      );
    }
    if (options.payload !== undefined && typeof options.payload !== "function") {
      return Promise.reject(
        new TypeError(`payload must be a function (rank, index) => value, got ${options.payload}`),
      );
    }
    const unusable = this.#unusable();
    if (unusable !== null) return Promise.reject(unusable);
    if (this.#run !== null) {
      return Promise.reject(new Error("a run is already in progress on this pool"));
    }
    const id = this.#nextId++;
    const firstIteration = this.#nextIteration;
    this.#nextIteration += iterations;
    return new Promise<PipelineRunResult>((resolve, reject) => {
      this.#run = {
        firstIteration,
        done: new Array(this.ranks).fill(undefined),
        count: 0,
        resolve,
        reject,
      };
      this.#lastProgress = -1;
      this.#lastProgressAt = performance.now();
      this.#workers.forEach((w, r) => {
        const payloads = options.payload === undefined
          ? undefined
          : Array.from({ length: iterations }, (_, i) => options.payload!(r, i));
        const msg: ToWorker = {
          type: "run",
          id,
          firstIteration,
          iterations,
          payloads,
          forwardOnly: options.forwardOnly === true,
        };
        w.worker.postMessage(msg);
      });
    });
  }

  /** Sends a request to rank `rank`'s executor (`executor.call(method, args)`). */
  call(rank: number, method: string, args?: unknown): Promise<unknown> {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.ranks) {
      return Promise.reject(new RangeError(`rank must be in [0, ${this.ranks - 1}], got ${rank}`));
    }
    if (typeof method !== "string") {
      return Promise.reject(new TypeError(`method must be a string, got ${typeof method}`));
    }
    const unusable = this.#unusable();
    if (unusable !== null) return Promise.reject(unusable);
    const id = this.#nextId++;
    return new Promise<unknown>((resolve, reject) => {
      this.#calls.set(id, { rank, method, resolve, reject });
      const msg: ToWorker = { type: "call", id, method, args };
      this.#workers[rank].worker.postMessage(msg);
    });
  }

  /**
   * Ends every worker: asks each to dispose its executor (up to `graceMs`,
   * default 2000), terminates all of them and (where the OS tells: Linux,
   * with read access to /proc) waits for their threads to exit. Idempotent;
   * pending runs and calls reject.
   */
  async dispose(graceMs = 2000): Promise<void> {
    if (this.#closed) return await this.#shutdownDone;
    this.#closed = true;
    clearTimeout(this.#startupTimer);
    clearInterval(this.#watchdog);
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
    this.#shutdownDone = this.#shutdown(new Error("the pipeline worker pool was disposed"));
    await this.#shutdownDone;
  }

  #unusable(): Error | null {
    if (this.#failure !== null) {
      return new Error(`the pool failed and is closed: ${this.#failure.message}`, {
        cause: this.#failure,
      });
    }
    if (this.#closed) return new Error("the pipeline worker pool was disposed");
    return null;
  }

  #onMessage(rank: number, msg: FromWorker): void {
    switch (msg.type) {
      case "ready":
        if (msg.thread !== undefined) this.#threads.push(msg.thread);
        this.#threadOf[rank] = msg.thread;
        if (++this.#ready === this.ranks) {
          clearTimeout(this.#startupTimer);
          // Heartbeats count from here on: the startup timeout covered loading.
          this.#lastHeartbeat.fill(performance.now());
          this.#startResolve();
        }
        break;
      case "done": {
        const run = this.#run;
        if (run === null || run.done[rank] !== undefined) return;
        run.done[rank] = { events: msg.events, reports: msg.reports };
        if (++run.count === this.ranks) this.#finishRun(run);
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

  #finishRun(run: PendingRun): void {
    this.#run = null;
    let t0 = Infinity;
    for (const d of run.done) for (const e of d!.events) t0 = Math.min(t0, e.start);
    if (!Number.isFinite(t0)) t0 = performance.now();
    const events = run.done.flatMap((d) =>
      d!.events.map((e) => ({ ...e, start: e.start - t0, end: e.end - t0 }))
    ).sort((a, b) => a.start - b.start || a.rank - b.rank);
    run.resolve({
      ...summarizeTimeline(events, this.ranks),
      firstIteration: run.firstIteration,
      events,
      reports: run.done.map((d) => d!.reports),
      startTime: t0,
    });
  }

  #fromReport(rank: number, report: ErrorReport): PipelineWorkerError {
    if (report.action !== undefined) {
      return new PipelineWorkerError({
        rank,
        kind: "error",
        action: report.action,
        iteration: report.iteration,
        detail: report.detail,
        workerStack: report.stack,
      });
    }
    return this.#blame(rank, "error", report.detail, report.stack);
  }

  // Names what `rank` was doing from the shared status board.
  #blame(
    rank: number,
    kind: PipelineFailure["kind"],
    detail: string,
    workerStack?: string,
  ): PipelineWorkerError {
    const base = SLOT_BASE + rank * SLOT_SIZE;
    const state = Atomics.load(this.#board, base + STATE);
    const index = Atomics.load(this.#board, base + INDEX);
    const iteration = Atomics.load(this.#board, base + ITERATION);
    const action = this.schedule.actions[rank][index];
    if (
      action === undefined || (state !== STATE_CODES.compute && state !== STATE_CODES.recv &&
        state !== STATE_CODES.step)
    ) {
      return new PipelineWorkerError({ rank, kind, detail, workerStack });
    }
    const note = state === STATE_CODES.recv
      ? " (while waiting for its input)"
      : state === STATE_CODES.step
      ? ` (in the optimizer step of stage ${action.stage})`
      : "";
    return new PipelineWorkerError({
      rank,
      kind,
      action,
      iteration,
      between: state === STATE_CODES.step,
      detail: detail + note,
      workerStack,
    });
  }

  #check(): void {
    if (this.#closed || this.#ready < this.ranks) return;
    const now = performance.now();
    for (let r = 0; r < this.ranks; r++) {
      const silent = now - this.#lastHeartbeat[r];
      if (silent <= this.#watchMs) {
        this.#cpuTicks[r] = undefined;
        continue;
      }
      const state = Atomics.load(this.#board, SLOT_BASE + r * SLOT_SIZE + STATE);
      const working = state === STATE_CODES.compute || state === STATE_CODES.step;
      let cpuSeen = false;
      if (working) {
        const ticks = threadCpuTicks(this.#threadOf[r]);
        if (ticks === undefined) continue; // cannot tell compute from a hang: the stall timeout judges
        cpuSeen = true;
        const before = this.#cpuTicks[r];
        this.#cpuTicks[r] = ticks;
        if (before !== undefined && ticks > before) this.#lastCpuAt[r] = now;
      }
      const quiet = now - Math.max(this.#lastHeartbeat[r], this.#lastCpuAt[r]);
      if (quiet > this.#heartbeatTimeoutMs) {
        this.#fail(
          this.#blame(
            r,
            "hang",
            `no heartbeat for ${Math.round(silent)} ms (timeout ${this.#heartbeatTimeoutMs} ms)` +
              (cpuSeen ? `, its thread using no CPU for ${Math.round(quiet)} ms` : ""),
          ),
        );
        return;
      }
    }
    if (this.#run === null) return;
    let progress = 0;
    for (let r = 0; r < this.ranks; r++) {
      progress += Atomics.load(this.#board, SLOT_BASE + r * SLOT_SIZE + PROGRESS);
    }
    if (progress !== this.#lastProgress) {
      this.#lastProgress = progress;
      this.#lastProgressAt = now;
      return;
    }
    const still = now - this.#lastProgressAt;
    if (still <= this.#stallTimeoutMs) return;
    // Blame a rank inside an action (or step) first: the others wait on it.
    const states = Array.from(
      { length: this.ranks },
      (_, r) => Atomics.load(this.#board, SLOT_BASE + r * SLOT_SIZE + STATE),
    );
    let culprit = states.findIndex((s) => s === STATE_CODES.compute || s === STATE_CODES.step);
    const waiting = states.map((s, r) => s === STATE_CODES.recv ? r : -1).filter((r) => r >= 0);
    let detail = `no action started on any rank for ${
      Math.round(still)
    } ms (stall timeout ${this.#stallTimeoutMs} ms)`;
    if (culprit < 0) {
      culprit = Math.max(0, waiting[0] ?? 0);
      const list = waiting.map((r) => {
        const i = Atomics.load(this.#board, SLOT_BASE + r * SLOT_SIZE + INDEX);
        const a = this.schedule.actions[r][i];
        return a === undefined ? `rank ${r}` : `rank ${r} (${formatAction(a)})`;
      });
      detail += `; every busy rank waits for input: ${list.join(", ")}`;
    }
    this.#fail(this.#blame(culprit, "stall", detail));
  }

  #fail(error: Error): void {
    if (this.#failure !== null || this.#closed) return;
    this.#failure = error;
    this.#closed = true;
    this.#shutdownDone = this.#shutdown(error);
  }

  // Wakes blocked executors, aborts the control plane and terminates every
  // worker; pending operations reject once the channel has settled, so that
  // nothing of the pool is left running when a caller sees the error.
  async #shutdown(error: Error): Promise<void> {
    clearTimeout(this.#startupTimer);
    clearInterval(this.#watchdog);
    Atomics.store(this.#board, ABORT_INDEX, 1);
    Atomics.notify(this.#board, ABORT_INDEX);
    this.#control.abort(error.message);
    for (const w of this.#workers) w.terminate();
    await this.#control.close();
    // A terminated worker still tears down its native state (V8 heap,
    // WebGPU device, Mesa's EGL display) on its own thread; a process that
    // exits meanwhile can crash (heap corruption, EGL BadDisplay), so the
    // pool is done only once those threads are gone.
    const watched = this.#threads.length === this.#workers.length &&
      await waitForThreadsToExit(this.#threads, THREAD_EXIT_TIMEOUT_MS);
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
