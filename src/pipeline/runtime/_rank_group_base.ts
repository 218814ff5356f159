// What every RankGroup shares: its schedule and rank count, its closed and
// failed state, the checks a run or call makes before any work, the
// iteration count across runs, and raising an abort. Not exported from the
// package.

import type { Schedule } from "../schedule/schedule.ts";
import type { CommBackend } from "../comm/backend.ts";
import type { CallMap, NoCalls } from "./rank_executor.ts";
import type {
  RankGroup,
  RankGroupKind,
  RankGroupRunOptions,
  RankGroupRunResult,
} from "./rank_group.ts";
import { type CheckedRun, checkRunOptions } from "./_run_results.ts";
import { describeValue } from "../../text/describe.ts";

/**
 * @internal Base of the rank groups. A subclass sets `isClosed` when it is
 * disposed or fails and `failedWith` when it fails, and answers the calls
 * that `call` has checked (`answer`). A run begun with `beginRun` sets
 * `running` (the subclass clears it when the run ends); while it is set,
 * other runs and calls are refused. The groups whose runs happen elsewhere
 * (workers, a host process) keep their own run state and take calls during
 * a run.
 */
export abstract class RankGroupBase<C extends CallMap = NoCalls> implements RankGroup<C> {
  /** Where the ranks live. */
  abstract readonly kind: RankGroupKind;
  /** The schedule every run follows. */
  readonly schedule: Schedule;
  /** Whether the group was disposed or brought down by a failure. */
  protected isClosed = false;
  /** The failure that brought the group down, or null. */
  protected failedWith: Error | null = null;
  /** Whether a run begun with `beginRun` is in progress. */
  protected running = false;
  readonly #disposedMessage: string;
  #nextIteration = 0;

  /** Replicas D of the pipeline (data parallelism; 1: one pipeline). */
  readonly replicas: number;

  /**
   * The group of `schedule` (`replicas` copies of it); a run or call on it
   * once disposed throws `disposedMessage`.
   */
  constructor(schedule: Schedule, disposedMessage = "the rank group was disposed", replicas = 1) {
    this.schedule = schedule;
    this.#disposedMessage = disposedMessage;
    this.replicas = replicas;
  }

  /** Number of ranks: D·P (global rank `k·P + p` is pipeline rank p of replica k). */
  get ranks(): number {
    return this.schedule.ranks * this.replicas;
  }

  /** Whether the group was disposed or brought down by a failure. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** The failure that brought the group down, or null. */
  get failure(): Error | null {
    return this.failedWith;
  }

  /** See {@linkcode RankGroup.run}. */
  abstract run(options?: RankGroupRunOptions): Promise<RankGroupRunResult>;

  /**
   * Calls `method` of rank `rank`'s executor (see {@linkcode RankGroup.call}):
   * checks the rank and the group (not failed or disposed, no `running`
   * run), then resolves with the answer.
   */
  async call<K extends keyof C & string>(
    rank: number,
    method: K,
    args: C[K]["args"],
  ): Promise<C[K]["result"]> {
    this.checkRank(rank);
    this.throwIfUnusable(true);
    return await this.answer(rank, method, args) as C[K]["result"];
  }

  /** Runs call `method` of rank `rank` (checked) with `args`; resolves with its result. */
  protected abstract answer(
    rank: number,
    method: keyof C & string,
    args: unknown,
  ): Promise<unknown>;

  /** See {@linkcode RankGroup.dispose}. */
  abstract dispose(): Promise<void>;

  /**
   * The error a run or call meets on a group that failed (naming the
   * failure, its cause) or was disposed, else null.
   */
  protected unusable(): Error | null {
    if (this.failedWith !== null) {
      return new Error(`the rank group failed and is closed: ${this.failedWith.message}`, {
        cause: this.failedWith,
      });
    }
    if (this.isClosed) return new Error(this.#disposedMessage);
    return null;
  }

  /** Throws what `unusable` names; with `idle`, also while a run is in progress. */
  protected throwIfUnusable(idle = false): void {
    const e = this.unusable();
    if (e !== null) throw e;
    if (idle && this.running) throw new Error("a run is already in progress on this rank group");
  }

  /** Throws a RangeError unless `rank` is one of the group's ranks. */
  protected checkRank(rank: number): void {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.ranks) {
      throw new RangeError(`rank must be in [0, ${this.ranks - 1}], got ${describeValue(rank)}`);
    }
  }

  /** Takes `iterations` iterations: returns the first one's index (they count on across runs). */
  protected takeIterations(iterations: number): number {
    const first = this.#nextIteration;
    this.#nextIteration += iterations;
    return first;
  }

  /**
   * The start of a run whose ranks are run from here: checks `options` and
   * the group (idle), marks it running and takes its iterations.
   */
  protected beginRun(options: RankGroupRunOptions | undefined): {
    run: CheckedRun;
    first: number;
  } {
    const run = checkRunOptions(options);
    this.throwIfUnusable(true);
    this.running = true;
    return { run, first: this.takeIterations(run.iterations) };
  }
}

/**
 * Aborts a run that failed with `e`: wakes executors blocked on `abortFlag`,
 * aborts `controller` (executors' signal) and the transport, naming `e`.
 */
export function raiseAbort(
  abortFlag: Int32Array,
  controller: AbortController,
  comm: CommBackend,
  e: unknown,
): void {
  Atomics.store(abortFlag, 0, 1);
  Atomics.notify(abortFlag, 0);
  controller.abort(e);
  comm.abort(e instanceof Error ? e.message : String(e));
}
