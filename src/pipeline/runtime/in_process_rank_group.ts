/**
 * Every rank of a pipeline in this thread: a {@linkcode RankGroup} over an
 * {@linkcode InProcessBackend} group, for tests, debugging and
 * single-threaded use. The executors and their transport are created once,
 * with the group, and serve every run.
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import type { Schedule } from "../schedule/schedule.ts";
import { checkSchedule } from "./checked_schedule.ts";
import { InProcessBackend } from "../comm/in_process.ts";
import type { CallMap, NoCalls, RankExecutor, RankExecutorFactory } from "./rank_executor.ts";
import type { RankGroupKind, RankGroupRunOptions, RankGroupRunResult } from "./rank_group.ts";
import { runRank } from "./rank_interpreter.ts";
import { assembleRun } from "./_run_results.ts";
import { executorInit, optionsFor } from "./_placement.ts";
import { raiseAbort, RankGroupBase } from "./_rank_group_base.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";
import { checkRunPolicy, type RunPolicy, type RunPolicyOptions } from "./run_policy.ts";
import type { CommBackend } from "../comm/backend.ts";
import type { RankRunResult } from "./rank_interpreter.ts";
import { checkReplicas, GradientSync, gridPlace, inGrid, ReplicaComm } from "./gradient_sync.ts";
import { describeValue } from "../../text/describe.ts";

// A replica's share with its events on global rank `rank`.
function inGridRun(r: RankRunResult, rank: number): RankRunResult {
  return { ...r, events: r.events.map((e) => ({ ...e, rank })) };
}

/** Options of {@linkcode InProcessRankGroup.create}. */
export interface InProcessRankGroupOptions<C extends CallMap = NoCalls> {
  /** The schedule (validated here). */
  readonly schedule: Schedule;
  /** Builds each rank's executor (given the same init a worker would give). */
  readonly createExecutor: RankExecutorFactory<C>;
  /**
   * `init.options` of every executor (structured-cloned, as for a worker); a
   * function is called with each rank to give that rank its own options.
   */
  readonly executorOptions?: unknown;
  /** The run's policy, checked here (see {@linkcode checkRunPolicy}; default none). */
  readonly policy?: RunPolicyOptions;
  /**
   * Replicas D of the pipeline (data parallelism; default 1): D·P ranks,
   * global rank `k·P + p` running pipeline rank p of replica k, each
   * stage's gradients averaged across its D replicas from its last
   * backward on, the stage stepping once the average is in (the executors
   * need `gradients` and `setGradients`).
   * Payloads, reports, events and calls then use global ranks.
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

/**
 * Every rank in this thread. See {@linkcode RankGroup}.
 *
 * @example
 * ```ts
 * import { generateSchedule, InProcessRankGroup } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * const group = await InProcessRankGroup.create({
 *   schedule: generateSchedule("zb-h1", { ranks: 2, microBatches: 4 }),
 *   createExecutor: createSyntheticExecutor,
 *   executorOptions: { ms: 0 },
 * });
 * try {
 *   console.log((await group.run()).events.length); // 24
 * } finally {
 *   await group.dispose();
 * }
 * ```
 */
export class InProcessRankGroup<C extends CallMap = NoCalls> extends RankGroupBase<C> {
  /**
   * Validates the schedule, creates the transport and every rank's executor.
   * When one rank's creation fails, the others' executors are disposed and
   * its error is thrown.
   */
  static async create<C extends CallMap = NoCalls>(
    options: InProcessRankGroupOptions<C>,
  ): Promise<InProcessRankGroup<C>> {
    if (options === null || typeof options !== "object") {
      throw new TypeError(
        `options must be an object { schedule, createExecutor }, got ${describeValue(options)}`,
      );
    }
    checkOptionSpelling(options, [
      "schedule",
      "createExecutor",
      "executorOptions",
      "policy",
      "dataParallel",
    ], "InProcessRankGroup: ");
    const schedule = checkSchedule(options.schedule);
    const policy = checkRunPolicy(options.policy);
    if (typeof options.createExecutor !== "function") {
      throw new TypeError(
        `createExecutor must be a function, got ${typeof options.createExecutor}`,
      );
    }
    const d = checkReplicas(options.dataParallel ?? 1);
    const p = schedule.ranks;
    const comms = InProcessBackend.createGroup(d * p);
    // Each replica's pipeline sees its own ranks 0 … P−1.
    const views: CommBackend[] = comms.map((c) =>
      d === 1 ? c : new ReplicaComm(c, gridPlace(c.rank, p).replica, p)
    );
    const abortFlag = new Int32Array(new SharedArrayBuffer(4));
    const controller = new AbortController();
    // Settle every rank's creation, so that none is left undisposed when another fails.
    const created = await Promise.allSettled(
      comms.map(async (comm, g) =>
        await options.createExecutor(executorInit(schedule, g % p, {
          options: structuredClone(optionsFor(options.executorOptions, comm.rank)),
          abortFlag,
          signal: controller.signal,
          comm: views[g],
        }))
      ),
    );
    const executors = created.flatMap((c) => c.status === "fulfilled" ? [c.value] : []);
    const rejected = created.find((c) => c.status === "rejected");
    if (rejected !== undefined) {
      await Promise.allSettled(executors.map((ex) => ex.dispose?.()));
      for (const c of comms) c.close();
      throw rejected.reason;
    }
    return new InProcessRankGroup(
      schedule,
      comms,
      views,
      executors,
      abortFlag,
      controller,
      policy,
      d,
      options.shardOptimizer === true,
    );
  }

  /** Every rank runs in this thread. */
  readonly kind: RankGroupKind = "in-process";
  readonly #comms: InProcessBackend[];
  readonly #views: CommBackend[];
  readonly #syncs: (GradientSync | undefined)[];
  readonly #executors: RankExecutor<C>[];
  readonly #abortFlag: Int32Array;
  readonly #controller: AbortController;
  readonly #policy: RunPolicy;
  #disposed: Promise<void> | null = null;

  private constructor(
    schedule: Schedule,
    comms: InProcessBackend[],
    views: CommBackend[],
    executors: RankExecutor<C>[],
    abortFlag: Int32Array,
    controller: AbortController,
    policy: RunPolicy,
    replicas: number,
    shardOptimizer: boolean,
  ) {
    super(schedule, undefined, replicas);
    this.#policy = policy;
    this.#comms = comms;
    this.#views = views;
    this.#syncs = comms.map((comm) =>
      replicas === 1
        ? undefined
        : new GradientSync({ comm, replicas, pipelineRanks: schedule.ranks, shardOptimizer })
    );
    this.#executors = executors;
    this.#abortFlag = abortFlag;
    this.#controller = controller;
  }

  /**
   * Runs every rank's list in this thread. The first rank to fail aborts
   * the others; its error is thrown and the group is closed (its executors
   * disposed).
   */
  async run(options?: RankGroupRunOptions): Promise<RankGroupRunResult> {
    const { run, first } = this.beginRun(options);
    let firstError: unknown = null;
    // One thread runs every rank: a promise rejected with nobody to handle
    // it is charged to the action that started last.
    let last: { rank: number; index: number; iteration: number } | null = null;
    const onRejection = (e: PromiseRejectionEvent) => {
      e.preventDefault();
      const reason = e.reason instanceof Error ? e.reason.message : String(e.reason);
      const P = this.schedule.ranks;
      const action = last === null ? undefined : this.schedule.actions[last.rank % P][last.index];
      const err = new PipelineRankError({
        rank: last?.rank ?? 0,
        kind: "error",
        ...(action === undefined ? {} : { action, iteration: last!.iteration }),
        detail: `unhandled promise rejection: ${reason} (every rank runs in this thread: ` +
          "it surfaced after this action started, which need not be its source)",
      });
      if (firstError === null) {
        firstError = err;
        this.#controller.abort(err);
        for (const c of this.#comms) c.abort(err.message);
      }
    };
    globalThis.addEventListener("unhandledrejection", onRejection);
    try {
      const P = this.schedule.ranks;
      const shares = await Promise.all(this.#comms.map((comm, rank) =>
        runRank({
          schedule: this.schedule,
          rank: rank % P,
          comm: this.#views[rank],
          ...(this.#syncs[rank] === undefined ? {} : { gradientSync: this.#syncs[rank] }),
          executor: this.#executors[rank],
          firstIteration: first,
          iterations: run.iterations,
          payloads: run.payloads(rank),
          forwardOnly: run.forwardOnly,
          abortFlag: this.#abortFlag,
          policy: this.#policy,
          onState: (state, index, iteration) => {
            if (state === "compute" || state === "step") last = { rank, index, iteration };
          },
        }).then((r) => this.replicas === 1 ? r : inGridRun(r, rank), (e) => {
          if (this.replicas > 1) e = inGrid(e, Math.floor(rank / P), P);
          if (firstError === null) {
            firstError = e;
            raiseAbort(this.#abortFlag, this.#controller, comm, e);
          }
          return { events: [], reports: [] };
        })
      ));
      // A rejection left unhandled by the last actions surfaces now.
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (firstError !== null) throw firstError;
      return assembleRun(this.ranks, first, shares);
    } catch (e) {
      this.failedWith = e instanceof Error ? e : new Error(String(e));
      await this.#release();
      throw e;
    } finally {
      globalThis.removeEventListener("unhandledrejection", onRejection);
      this.running = false;
    }
  }

  /** @ignore */
  protected async answer(rank: number, method: keyof C & string, args: unknown): Promise<unknown> {
    const handler = this.#executors[rank].calls?.[method];
    if (typeof handler !== "function") {
      throw new TypeError(`the executor of rank ${rank} answers no call "${method}"`);
    }
    return await handler(args);
  }

  /** Disposes every executor and closes the transport. Idempotent. */
  async dispose(): Promise<void> {
    await this.#release();
  }

  // Disposes every executor (a failed dispose is thrown once all have run) and closes the comms.
  #release(): Promise<void> {
    this.isClosed = true;
    this.#disposed ??= (async () => {
      const results = await Promise.allSettled(this.#executors.map((ex) => ex.dispose?.()));
      for (const c of this.#comms) c.close();
      const failed = results.find((r) => r.status === "rejected");
      if (failed !== undefined) throw failed.reason;
    })();
    return this.#disposed;
  }
}

/** What {@linkcode runPipelineInProcess} returns. */
export type InProcessRunResult = RankGroupRunResult;

/** Options of {@linkcode runPipelineInProcess}. */
export interface InProcessRunOptions<C extends CallMap = NoCalls>
  extends Omit<InProcessRankGroupOptions<C>, "schedule"> {
  /** Iterations back to back (default 1). */
  readonly iterations?: number;
  /** Forward actions only (prediction). */
  readonly forwardOnly?: boolean;
}

/**
 * Runs a schedule once in this thread: creates an
 * {@linkcode InProcessRankGroup}, runs it and disposes it (every executor
 * that was created is disposed, whether the run succeeds or not).
 *
 * @example
 * ```ts
 * import { generateSchedule, runPipelineInProcess } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * const schedule = generateSchedule("zb-h1", { ranks: 2, microBatches: 4 });
 * const r = await runPipelineInProcess(schedule, {
 *   createExecutor: createSyntheticExecutor, executorOptions: { ms: 0 },
 * });
 * console.log(r.events.length); // 24
 * ```
 */
export async function runPipelineInProcess<C extends CallMap = NoCalls>(
  schedule: Schedule,
  options: InProcessRunOptions<C>,
): Promise<InProcessRunResult> {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `options must be an object { createExecutor, ... }, got ${describeValue(options)}`,
    );
  }
  const group = await InProcessRankGroup.create({
    schedule,
    createExecutor: options.createExecutor,
    executorOptions: options.executorOptions,
    ...(options.policy === undefined ? {} : { policy: options.policy }),
    ...(options.dataParallel === undefined ? {} : { dataParallel: options.dataParallel }),
  });
  let result: InProcessRunResult;
  try {
    result = await group.run({ iterations: options.iterations, forwardOnly: options.forwardOnly });
  } catch (e) {
    await group.dispose().catch(() => {});
    throw e;
  }
  await group.dispose();
  return result;
}
