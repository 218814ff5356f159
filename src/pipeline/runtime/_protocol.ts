// Messages between the worker rank group (main thread) and a stage worker, and the
// layout of the shared status board. Not exported from the package.

import type { Action } from "../schedule/action.ts";
import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import type { RunPolicy } from "./run_policy.ts";
import type { GradNorm, RolledBack } from "./step_validation.ts";

/** Status board layout: Int32Array over a SharedArrayBuffer. */
export const ABORT_INDEX = 0;
/** First rank slot; rank r's slot starts at SLOT_BASE + r * SLOT_SIZE. */
export const SLOT_BASE = 4;
/** Int32 cells per rank: state, action index, iteration, progress counter, heartbeat counter. */
export const SLOT_SIZE = 5;
export const STATE = 0;
export const INDEX = 1;
export const ITERATION = 2;
export const PROGRESS = 3;
/**
 * Counts the rank's heartbeats: a timer on the worker's event loop adds one
 * every heartbeat interval (it stops while the thread computes or hangs),
 * and the watchdog reads it. A cell rather than a message: nothing wakes
 * for it, so idle ranks cost next to no CPU.
 */
export const BEAT = 4;

/** State codes on the board. */
export const STATE_CODES = { idle: 0, recv: 1, compute: 2, step: 3, done: 4 } as const;

export function boardLength(ranks: number): number {
  return SLOT_BASE + ranks * SLOT_SIZE;
}

/** Rank `rank`'s cell `field` (STATE, INDEX, ITERATION or PROGRESS) on the board. */
export function readSlot(board: Int32Array, rank: number, field: number): number {
  return Atomics.load(board, SLOT_BASE + rank * SLOT_SIZE + field);
}

/** Publishes what rank `rank` does now (state, action index, iteration) and counts progress. */
export function writeSlot(
  board: Int32Array,
  rank: number,
  state: keyof typeof STATE_CODES,
  index: number,
  iteration: number,
): void {
  const base = SLOT_BASE + rank * SLOT_SIZE;
  Atomics.store(board, base + STATE, STATE_CODES[state]);
  Atomics.store(board, base + INDEX, index);
  Atomics.store(board, base + ITERATION, iteration);
  Atomics.add(board, base + PROGRESS, 1);
}

/** Adds one to rank `rank`'s heartbeat counter (see {@linkcode BEAT}). */
export function beat(board: Int32Array, rank: number): void {
  Atomics.add(board, SLOT_BASE + rank * SLOT_SIZE + BEAT, 1);
}

export interface ExecutorSpec {
  /** Module URL exporting `createRankExecutor`. */
  readonly module: string;
  readonly options?: unknown;
}

export type ToWorker =
  | {
    readonly type: "init";
    readonly rank: number;
    readonly runId: string;
    readonly ports: (MessagePort | null)[];
    readonly schedule: Schedule;
    readonly executor: ExecutorSpec;
    readonly timeOrigin: number;
    readonly board: SharedArrayBuffer;
    readonly heartbeatIntervalMs: number;
    readonly connectTimeoutMs: number;
    /** The run's policy, checked again by the worker. */
    readonly policy: RunPolicy;
    /** Replicas D: this worker's `rank` is global (`k·P + p`) over D·P ranks. */
    readonly replicas: number;
    /** ZeRO-1: the optimizer state sharded across the replicas. */
    readonly shardOptimizer: boolean;
  }
  | {
    readonly type: "run";
    readonly id: number;
    readonly firstIteration: number;
    readonly iterations: number;
    readonly payloads: readonly unknown[] | undefined;
    readonly forwardOnly: boolean;
  }
  | { readonly type: "call"; readonly id: number; readonly method: string; readonly args: unknown }
  | { readonly type: "dispose" };

export interface ErrorReport {
  readonly type: "error";
  readonly rank: number;
  readonly name: string;
  readonly message: string;
  readonly detail: string;
  readonly stack?: string;
  readonly action?: Action;
  readonly iteration?: number;
  readonly between?: boolean;
}

export type FromWorker =
  // `thread`: the worker's OS thread id where the platform tells it (Linux),
  // so that the pool can wait for that thread to exit after terminating it.
  | { readonly type: "ready"; readonly thread?: number }
  | {
    readonly type: "done";
    readonly id: number;
    readonly events: TimedEvent[];
    readonly reports: unknown[];
    readonly rolledBack: RolledBack[];
    readonly gradNorms: GradNorm[];
  }
  | { readonly type: "result"; readonly id: number; readonly value: unknown }
  | { readonly type: "failed"; readonly id?: number; readonly report: ErrorReport }
  | { readonly type: "disposed" };
