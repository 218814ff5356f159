/**
 * The options of a worker rank group (also a subprocess group's) and their
 * checks, run before any worker starts.
 *
 * @module
 */

import type { Schedule } from "../schedule/schedule.ts";
import { validateSchedule } from "../analysis/validate.ts";
import { checkFaultInjection, type FaultInjection } from "./fault_injection.ts";
import { checkValidateSteps } from "./_run_results.ts";
import { checkClipNorm } from "./_verdicts.ts";

/** Which executor the workers build. */
export interface ExecutorChoice {
  /** URL of a module that exports `createRankExecutor` (a `RankExecutorFactory`). */
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
  /** Global-norm clipping by post-validation (see `RankRunOptions.clipNorm`; absent: none). */
  readonly clipNorm?: number;
}

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
  checkClipNorm(options.clipNorm);
  return t;
}
