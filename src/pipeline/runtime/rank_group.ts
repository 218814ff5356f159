/**
 * A rank group: the ranks of one pipeline, each with its executor, run
 * together. One interface, several homes: every rank in this thread
 * ({@linkcode InProcessRankGroup}), one Deno worker per rank
 * ({@linkcode WorkerRankGroup}), one process per rank with this process
 * holding one ({@linkcode SpmdRankGroup}, SPMD under `mpirun`). Each rank runs the same loop
 * (`runRank`) and the group counts iterations on across runs.
 *
 * @module
 */

import type { Schedule, TimedEvent } from "../schedule/schedule.ts";
import type { TimelineSummary } from "../analysis/timeline_summary.ts";
import type { CallMap, NoCalls } from "./rank_executor.ts";
import type { GradNorm, RolledBack } from "./step_validation.ts";

/** Where a group's ranks live. */
export type RankGroupKind = "in-process" | "workers" | "subprocess" | "mpi";

/** Options of {@linkcode RankGroup.run}. */
export interface RankGroupRunOptions {
  /** Iterations back to back, with no barrier between them (default 1). */
  readonly iterations?: number;
  /** Payload for `executor.beginIteration` of `rank` in the run's `index`-th iteration. */
  readonly payload?: (rank: number, index: number) => unknown;
  /**
   * Run only the forward actions of each rank's list, without optimizer
   * steps (prediction); the executor sees `ctx.forwardOnly`.
   */
  readonly forwardOnly?: boolean;
}

/** What a run reports; times in ms from the run's first action start. */
export interface RankGroupRunResult extends TimelineSummary {
  /** Index of this run's first iteration (iterations count on across runs). */
  readonly firstIteration: number;
  /** Every action of every rank, sorted by start then rank. */
  readonly events: readonly TimedEvent[];
  /** `reports[rank][i]`: the executor's `endIteration` value for the run's i-th iteration. */
  readonly reports: readonly (readonly unknown[])[];
  /** Steps that post-validation rolled back (see `RunPolicy.nonFinite`), by iteration. */
  readonly rolledBack: readonly RolledBack[];
  /**
   * With clipping by post-validation (`RunPolicy.clipGradNorm`): each iteration's global
   * gradient norm before clipping, by iteration (empty without it).
   */
  readonly gradNorms: readonly GradNorm[];
  /** `performance.now()` on this thread at the run's time 0. */
  readonly startTime: number;
}

/**
 * The ranks of one pipeline with their executors. `run` executes the
 * schedule for some iterations; `call` sends a typed request (per the
 * executors' {@linkcode CallMap}) to one rank. A rank that fails rejects the
 * run with a `PipelineRankError` naming it, and closes the group (build a
 * new one). Always `dispose`.
 *
 * @example
 * ```ts
 * import { generateSchedule, InProcessRankGroup, type RankGroup } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * const group: RankGroup = await InProcessRankGroup.create({
 *   schedule: generateSchedule("1f1b", { ranks: 2, microBatches: 2 }),
 *   createExecutor: createSyntheticExecutor,
 *   executorOptions: { ms: 0 },
 * });
 * const r = await group.run({ iterations: 2 });
 * console.log(r.firstIteration, r.events.length); // 0 16
 * console.log((await group.run()).firstIteration); // 2
 * await group.dispose();
 * ```
 */
export interface RankGroup<C extends CallMap = NoCalls> {
  /** Where the ranks live. */
  readonly kind: RankGroupKind;
  /** The schedule every run follows. */
  readonly schedule: Schedule;
  /**
   * Number of ranks: P, or D·P with data parallelism (global rank
   * `k·P + p` runs pipeline rank p of replica k; runs' payloads, reports
   * and events and `call` use global ranks).
   */
  readonly ranks: number;
  /** Replicas D of the pipeline (data parallelism; absent or 1: one pipeline). */
  readonly replicas?: number;
  /**
   * The one rank this process runs, where the group holds only one (SPMD:
   * `"mpi"`); absent where every rank is run from here.
   */
  readonly localRank?: number;
  /** Whether the group was disposed or brought down by a failure. */
  readonly closed: boolean;
  /** The failure that brought the group down, or null. */
  readonly failure: Error | null;
  /** Runs the schedule; iteration indices continue across runs. */
  run(options?: RankGroupRunOptions): Promise<RankGroupRunResult>;
  /** Sends `method` with `args` to rank `rank`'s executor and resolves with its result. */
  call<K extends keyof C & string>(
    rank: number,
    method: K,
    args: C[K]["args"],
  ): Promise<C[K]["result"]>;
  /** Releases every rank (executors disposed, workers ended). Idempotent. */
  dispose(): Promise<void>;
}
