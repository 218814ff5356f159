/**
 * The options of a worker rank group (also a subprocess group's) and their
 * checks, run before any worker starts.
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import type { Schedule } from "../schedule/schedule.ts";
import { checkSchedule } from "./checked_schedule.ts";
import { checkReplicas } from "./gradient_sync.ts";
import { checkRunPolicy, type RunPolicy, type RunPolicyOptions } from "./run_policy.ts";
import { describeValue } from "../../text/describe.ts";

/** Which executor the workers build. */
export interface ExecutorChoice {
  /** URL of a module that exports `createRankExecutor` (a `RankExecutorFactory`). */
  readonly module: string | URL;
  /**
   * Passed (structured-cloned) to the factory as `init.options`; a function
   * is called on the main thread with each rank to give that rank its own
   * options (e.g. only its stages' weights).
   */
  readonly options?: unknown;
}

/** Options of {@linkcode WorkerRankGroup.create}. */
export interface WorkerRankGroupOptions {
  /** The schedule every run follows (validated before any worker starts). */
  readonly schedule: Schedule;
  /** Executor of every rank. */
  readonly executor: ExecutorChoice;
  /**
   * How often each worker beats (advances its heartbeat counter on the
   * shared status board), ms (default 200, or with the
   * policy's `heartbeatMs` a quarter of it, between 5 and 200).
   */
  readonly heartbeatIntervalMs?: number;
  /** Time allowed for the workers to load and meet (ms, default 30 000). */
  readonly startupTimeoutMs?: number;
  /**
   * The run's policy, checked before any worker starts (see
   * {@linkcode checkRunPolicy}; default none). Its `heartbeatMs`: a rank
   * silent this long (ms) once the group is ready is declared hung
   * (default 5000). Heartbeats come from the worker's event loop, so a
   * rank inside an action or step (per the status board) that holds its
   * thread in synchronous compute is silent too: it is not declared hung
   * while its thread is seen using CPU time (Linux /proc), or at all where
   * that cannot be seen. A thread blocked without using CPU (a deadlocked
   * wait) is hung; compute that never ends is left to `stallTimeoutMs`:
   * during a run, no action starting on any rank for this long (ms) is a
   * stall, a hang that keeps the event loop (and so the heartbeat) alive,
   * e.g. a promise that never settles (default 60 000).
   */
  readonly policy?: RunPolicyOptions;
  /**
   * Replicas D of the pipeline (data parallelism; default 1): D·P workers,
   * worker `k·P + p` running pipeline rank p of replica k, each stage's
   * gradients averaged across its D replicas from its last backward on,
   * the stage stepping once the average is in (the executors need
   * `gradients` and `setGradients`). Payloads,
   * reports, events and calls then use these global ranks.
   */
  readonly dataParallel?: number;
  /**
   * ZeRO-1 with `dataParallel` D > 1: each replica keeps and steps 1/D of
   * each stage's optimizer state; gradients are reduce-scattered and the
   * updated shares all-gathered (the executors need `ownedParameters` and
   * `setStageParameters` too, and must step only their share). Default false.
   */
  readonly shardOptimizer?: boolean;
}

function positive(value: unknown, what: string, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !(v > 0) || !Number.isFinite(v)) {
    throw new RangeError(
      `${what} must be a positive finite number of ms, got ${describeValue(value)}`,
    );
  }
  return v;
}

/** A worker group's options, checked and with their defaults. */
export interface CheckedWorkerGroup {
  /** The schedule, checked once (see `checkSchedule`). */
  readonly schedule: Schedule;
  /** The run's policy, checked. */
  readonly policy: RunPolicy;
  readonly heartbeatIntervalMs: number;
  /** A rank silent this long (ms) is hung: the policy's `heartbeatMs` or its default. */
  readonly hungAfterMs: number;
  /** No action starting this long (ms) is a stall: the policy's `stallTimeoutMs` or its default. */
  readonly stalledAfterMs: number;
  readonly startupTimeoutMs: number;
  /** Replicas D (1: one pipeline). */
  readonly replicas: number;
  /** ZeRO-1: the optimizer state sharded across the replicas. */
  readonly shardOptimizer: boolean;
}

/**
 * Checks a worker group's options before any worker starts (the schedule,
 * the executor choice, the timeouts, the policy) and returns them checked.
 */
export function checkWorkerGroupOptions(options: WorkerRankGroupOptions): CheckedWorkerGroup {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `options must be an object { schedule, executor, ... }, got ${describeValue(options)}`,
    );
  }
  checkOptionSpelling(options, [
    "schedule",
    "executor",
    "heartbeatIntervalMs",
    "startupTimeoutMs",
    "policy",
    "dataParallel",
  ], "rank group: ");
  const ex = options.executor;
  if (ex === null || typeof ex !== "object" || ex.module === undefined) {
    throw new TypeError(
      `executor must be an object { module, options } naming the executor module's URL, got ${
        ex === null || typeof ex !== "object" ? String(ex) : "no module"
      }`,
    );
  }
  const policy = checkRunPolicy(options.policy);
  const replicas = checkReplicas(options.dataParallel ?? 1);
  const hb = policy.heartbeatMs;
  const t = {
    heartbeatIntervalMs: positive(
      options.heartbeatIntervalMs,
      "heartbeatIntervalMs",
      hb === undefined ? 200 : Math.max(5, Math.min(200, hb / 4)),
    ),
    hungAfterMs: hb ?? 5000,
    stalledAfterMs: policy.stallTimeoutMs ?? 60_000,
    startupTimeoutMs: positive(options.startupTimeoutMs, "startupTimeoutMs", 30_000),
  };
  if (t.hungAfterMs <= t.heartbeatIntervalMs) {
    throw new RangeError(
      `heartbeatMs (${t.hungAfterMs}) must exceed heartbeatIntervalMs (${t.heartbeatIntervalMs})`,
    );
  }
  // Checked last: the full check (a dry run) only once everything else passed.
  return {
    schedule: checkSchedule(options.schedule),
    policy,
    replicas,
    shardOptimizer: options.shardOptimizer === true,
    ...t,
  };
}
