/**
 * One rank per process, every process running the same program (SPMD, as
 * under `mpirun`): a {@linkcode RankGroup} of which this process holds
 * exactly one rank, `comm.rank`, its executor built here on its own
 * backend; the other ranks are the same group in the peer processes.
 *
 * Every process calls the same group methods in the same order (it runs
 * the same script), so the group's own messages match by a counter:
 *
 * - `run`: each process runs its own rank's list (`runRank`), then the
 *   ranks exchange their events and reports (every rank gets all), so the
 *   run resolves on every rank with the same result (the same loss).
 *   Payloads: a process that has its own (the run's `payload` option) uses
 *   it; one that has none asks rank 0, which sends it that rank's payloads
 *   (none if rank 0 has none either).
 *   Rank 0 checks that every rank runs as many iterations as it does.
 * - `call(r, …)`: rank r runs the handler with its own arguments and sends
 *   the result (or its error) to every other rank, so the call resolves
 *   (or rejects) everywhere with rank r's result; other ranks' arguments
 *   are not used.
 * - `create`: every rank checks that all ranks built their stages and run
 *   the same schedule (and `fingerprint`); events are dated on rank 0's
 *   clock (`performance.timeOrigin` exchanged; across hosts up to their
 *   clock skew).
 *
 * With `dataParallel` D (data × pipeline parallelism) the transport holds
 * D·P processes: process `g` is global rank `g` = `k·P + p`, pipeline rank
 * `p` of replica `k`. Its executor and its run see only its replica's
 * pipeline, through a {@linkcode ReplicaComm} view of the transport, and the
 * D processes holding pipeline rank `p` average each stage's gradients
 * before its optimizer step with a {@linkcode GradientSync} (point-to-point
 * sends on the transport, summed in replica order: the same bits as the
 * in-process and worker groups give). Payloads, reports, events and calls
 * use global ranks.
 *
 * A rank whose run fails aborts the transport, so every other rank's run
 * rejects with a `CommAbortedError` naming it. A process the transport
 * finds lost (MPI) fails every other rank's run with a
 * {@linkcode PipelineRankError} for the lost rank (kind "exit", "hang" or
 * "stall"), named in the grid, quoting what its last heartbeat said it was
 * doing (the action is in the text only: the error's `action` is empty).
 *
 * @module
 */

import type { Schedule } from "../schedule/schedule.ts";
import { checkSchedule } from "./checked_schedule.ts";
import { CommAbortedError, type CommBackend } from "../comm/backend.ts";
import type { CallMap, NoCalls, RankExecutor, RankExecutorFactory } from "./rank_executor.ts";
import type { RankGroupKind, RankGroupRunOptions, RankGroupRunResult } from "./rank_group.ts";
import { type RankState, runRank } from "./rank_interpreter.ts";
import { formatAction } from "../schedule/action.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";
import { assembleRun, type CheckedRun, type RankShare } from "./_run_results.ts";
import { executorInit, optionsFor } from "./_placement.ts";
import { raiseAbort, RankGroupBase } from "./_rank_group_base.ts";
import { checkRunPolicy, type RunPolicy, type RunPolicyOptions } from "./run_policy.ts";
import { allGather, broadcastValue, digest, recvValue, sendValue, settingText } from "./_spmd.ts";
import { checkReplicas, GradientSync, gridPlace, inGrid, ReplicaComm } from "./gradient_sync.ts";
import { describeValue } from "../../text/describe.ts";

/** Options of {@linkcode SpmdRankGroup.create}. */
export interface SpmdRankGroupOptions<C extends CallMap = NoCalls> {
  /** The schedule (validated here); its rank count must equal `comm.size`. */
  readonly schedule: Schedule;
  /**
   * This process's transport: rank `comm.rank` of `comm.size` (an
   * `MpiBackend`, or any {@linkcode CommBackend} whose ranks run the same
   * program). The group does not close it unless `closeComm`.
   */
  readonly comm: CommBackend;
  /** Builds this process's executor (for rank `comm.rank`). */
  readonly createExecutor: RankExecutorFactory<C>;
  /**
   * `init.options` of the executor; a function is called with this rank to
   * give it its own options.
   */
  readonly executorOptions?: unknown;
  /** Extra text every rank must agree on (e.g. the model's description); default none. */
  readonly fingerprint?: string;
  /**
   * Named values every rank must agree on (the model, its initial weights,
   * the optimizer, a seed, the batch size…): compared with rank 0's at
   * creation (a digest of them all first, then each), a difference refused
   * on every rank naming the setting and both values. Bytes (a `Uint8Array`
   * or a list of them) are compared by digest.
   */
  readonly settings?: Readonly<Record<string, unknown>>;
  /** Close `comm` when the group is disposed (default false). */
  readonly closeComm?: boolean;
  /** The run's policy, checked here (see {@linkcode checkRunPolicy}; default none). */
  readonly policy?: RunPolicyOptions;
  /**
   * Replicas D of the pipeline (data parallelism; default 1): the transport
   * then holds D·P ranks, this process being global rank `comm.rank` =
   * `k·P + p`, pipeline rank p of replica k; each stage's gradients are
   * averaged across the D replicas from its last backward on, and it steps
   * once the average is in (the executor needs `gradients` and
   * `setGradients`).
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

// What every rank tells the others at creation.
interface Hello {
  readonly error: string | null;
  /** Each setting's name and text (see `settingText`). */
  readonly settings: readonly (readonly [string, string])[];
  /** A digest of them all, compared first. */
  readonly digest: string;
  readonly timeOrigin: number;
}

// What a rank tells rank 0 at the start of each run.
interface RunAsk {
  readonly have: boolean;
  readonly iterations: number;
  readonly forwardOnly: boolean;
}

type CallReply = { readonly ok: true; readonly value: unknown } | {
  readonly ok: false;
  readonly message: string;
};

// Groups made on each transport, so that a later group's tags never meet an earlier one's.
const groupsOn = new WeakMap<CommBackend, number>();

function scheduleFingerprint(s: Schedule): string {
  return `${s.name} p=${s.ranks} m=${s.microBatches} v=${s.stagesPerRank} ` +
    digest(JSON.stringify([s.stageToRank, s.actions]));
}

// What differs between rank `r`'s settings and rank 0's, setting by setting.
function settingsDiffer(
  theirs: readonly (readonly [string, string])[],
  ours: readonly (readonly [string, string])[],
  r: number,
): string {
  const mine = new Map(theirs);
  const zero = new Map(ours);
  const names = [...new Set([...zero.keys(), ...mine.keys()])];
  return names.filter((k) => mine.get(k) !== zero.get(k)).map((k) =>
    `rank ${r}'s ${k}: ${mine.get(k) ?? "not set"} (rank 0's: ${zero.get(k) ?? "not set"})`
  ).join("; ");
}

/**
 * This process's rank of an SPMD pipeline: one rank per process, every
 * process running the same program (under `mpirun`, with `comm` an
 * `MpiBackend`), each building only its own rank's executor. Every process
 * must make the same runs and calls in the same order; a failing rank makes
 * every rank's call reject naming it.
 *
 * @example Two "processes" in one, over in-process transports
 * ```ts
 * // Under mpirun each process runs this with `comm = await MpiBackend.init()`.
 * import assert from "node:assert/strict";
 * import { generateSchedule, InProcessBackend, SpmdRankGroup } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
 * const groups = await Promise.all(InProcessBackend.createGroup(2).map((comm) =>
 *   SpmdRankGroup.create({
 *     schedule,
 *     comm,
 *     createExecutor: createSyntheticExecutor,
 *     executorOptions: { ms: 0 },
 *     closeComm: true,
 *   })
 * ));
 * const runs = await Promise.all(groups.map((g) => g.run()));
 * assert.equal(runs[0].events.length, 16); // every rank's F and B of 4 micro-batches
 * await Promise.all(groups.map((g) => g.dispose()));
 * ```
 */
export class SpmdRankGroup<C extends CallMap = NoCalls> extends RankGroupBase<C> {
  /**
   * Validates the schedule against the transport, builds this rank's
   * executor and meets the other ranks: resolves on every rank once all
   * built their stages with the same schedule and fingerprint, or rejects
   * on every rank naming the ranks that failed or differ.
   */
  static async create<C extends CallMap = NoCalls>(
    options: SpmdRankGroupOptions<C>,
  ): Promise<SpmdRankGroup<C>> {
    if (options === null || typeof options !== "object") {
      throw new TypeError(
        `options must be an object { schedule, comm, createExecutor }, got ${
          describeValue(options)
        }`,
      );
    }
    const comm = options.comm;
    if (
      comm === null || typeof comm !== "object" || typeof comm.send !== "function" ||
      !Number.isInteger(comm.rank) || !Number.isInteger(comm.size)
    ) {
      throw new TypeError(`comm must be a CommBackend, got ${describeValue(comm)}`);
    }
    const schedule = checkSchedule(options.schedule);
    const replicas = checkReplicas(options.dataParallel ?? 1);
    const P = schedule.ranks;
    if (replicas === 1 && comm.size !== P) {
      throw new RangeError(
        `the schedule has ${P} ranks but the transport has ${comm.size} ` +
          `(under MPI: the number of processes): start one process per rank ` +
          `(mpirun -n ${P}) or plan for ${comm.size} ranks`,
      );
    }
    if (replicas > 1 && comm.size !== replicas * P) {
      throw new RangeError(
        `dataParallel ${replicas} replicas of a ${P}-rank schedule need ${replicas * P} ranks ` +
          `but the transport has ${comm.size} (under MPI: the number of processes): start ` +
          `one process per rank (mpirun -n ${replicas * P})`,
      );
    }
    if (typeof options.createExecutor !== "function") {
      throw new TypeError(
        `createExecutor must be a function, got ${typeof options.createExecutor}`,
      );
    }
    const policy = checkRunPolicy(options.policy);
    const fingerprint = options.fingerprint ?? "";
    if (typeof fingerprint !== "string") {
      throw new TypeError(`fingerprint must be a string, got ${typeof fingerprint}`);
    }
    const extra = options.settings ?? {};
    if (extra === null || typeof extra !== "object") {
      throw new TypeError(
        `settings must be an object of named values, got ${describeValue(extra)}`,
      );
    }
    const settings: [string, string][] = [
      ["schedule", scheduleFingerprint(schedule)],
      ...(fingerprint === "" ? [] : [["fingerprint", `digest ${digest(fingerprint)}`] as [
        string,
        string,
      ]]),
      ...(replicas === 1 ? [] : [["dataParallel", String(replicas)] as [string, string]]),
      ...Object.entries(extra).map(([k, v]) => [k, settingText(v)] as [string, string]),
    ];
    const group = (groupsOn.get(comm) ?? 0) + 1;
    groupsOn.set(comm, group);
    const rank = comm.rank;
    // This replica's pipeline sees its own ranks 0 … P−1.
    const view = replicas === 1 ? comm : new ReplicaComm(comm, gridPlace(rank, P).replica, P);
    const abortFlag = new Int32Array(new SharedArrayBuffer(4));
    const controller = new AbortController();
    let executor: RankExecutor<C> | null = null;
    let error: string | null = null;
    try {
      executor = await options.createExecutor(executorInit(schedule, rank % P, {
        options: structuredClone(optionsFor(options.executorOptions, rank)),
        abortFlag,
        signal: controller.signal,
        comm: view,
      }));
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
    }
    const mine: Hello = {
      error,
      settings,
      digest: digest(JSON.stringify(settings)),
      timeOrigin: performance.timeOrigin,
    };
    let hellos: Hello[];
    try {
      hellos = await allGather(comm, `spmd${group}/hello`, mine);
    } catch (e) {
      await executor?.dispose?.();
      throw e;
    }
    const failed = hellos.flatMap((h, r) => h.error === null ? [] : [`rank ${r}: ${h.error}`]);
    const differ = hellos.flatMap((h, r) => h.digest === hellos[0].digest ? [] : [r]);
    if (failed.length > 0 || differ.length > 0) {
      await executor?.dispose?.();
      if (options.closeComm === true) comm.close();
      throw failed.length > 0
        ? new Error(`could not build every rank's stages: ${failed.join("; ")}`)
        : new RangeError(
          `rank(s) ${differ.join(", ")} planned a different pipeline than rank 0: ${
            settingsDiffer(hellos[differ[0]].settings, hellos[0].settings, differ[0])
          }: every process must run the same script with the same arguments`,
        );
    }
    return new SpmdRankGroup<C>(schedule, comm, executor!, {
      view,
      replicas,
      shardOptimizer: options.shardOptimizer === true,
      group,
      abortFlag,
      controller,
      policy,
      closeComm: options.closeComm === true,
      clockOffset: performance.timeOrigin - hellos[0].timeOrigin,
    });
  }

  /** The ranks are processes (one here), as under MPI. */
  readonly kind: RankGroupKind = "mpi";
  /** The rank this process runs. */
  readonly localRank: number;
  readonly #comm: CommBackend;
  // This replica's view of the transport (the transport itself with one replica).
  readonly #view: CommBackend;
  readonly #sync: GradientSync | undefined;
  readonly #executor: RankExecutor<C>;
  readonly #group: number;
  readonly #abortFlag: Int32Array;
  readonly #controller: AbortController;
  readonly #policy: RunPolicy;
  readonly #closeComm: boolean;
  // performance.now() here + offset = rank 0's performance.now().
  readonly #clockOffset: number;
  #runs = 0;
  #calls = 0;
  #disposed: Promise<void> | null = null;

  private constructor(
    schedule: Schedule,
    comm: CommBackend,
    executor: RankExecutor<C>,
    o: {
      view: CommBackend;
      replicas: number;
      shardOptimizer: boolean;
      group: number;
      abortFlag: Int32Array;
      controller: AbortController;
      policy: RunPolicy;
      closeComm: boolean;
      clockOffset: number;
    },
  ) {
    super(schedule, undefined, o.replicas);
    this.localRank = comm.rank;
    this.#comm = comm;
    this.#view = o.view;
    this.#sync = o.replicas === 1 ? undefined : new GradientSync({
      comm,
      replicas: o.replicas,
      pipelineRanks: schedule.ranks,
      shardOptimizer: o.shardOptimizer,
    });
    this.#executor = executor;
    this.#group = o.group;
    this.#abortFlag = o.abortFlag;
    this.#controller = o.controller;
    this.#policy = o.policy;
    this.#closeComm = o.closeComm;
    this.#clockOffset = o.clockOffset;
  }

  /**
   * Runs this rank's list; resolves on every rank with every rank's events
   * and reports. A failure here aborts the transport (every rank's run
   * rejects); the group is then closed.
   */
  async run(options?: RankGroupRunOptions): Promise<RankGroupRunResult> {
    const { run, first } = this.beginRun(options);
    const base = `spmd${this.#group}/run${++this.#runs}`;
    const comm = this.#comm;
    const rank = comm.rank;
    const have = options?.payload !== undefined;
    let refusal: unknown = null;
    try {
      let payloads: unknown[] | undefined;
      let serving: Promise<void> = Promise.resolve();
      if (rank === 0) {
        payloads = run.payloads(0);
        // A refusal aborts the transport at once: the ranks waiting for
        // rank 0 fail with it instead of hanging.
        serving = this.#servePayloads(base, run).catch((e) => {
          refusal = e;
          comm.abort(e instanceof Error ? e.message : String(e));
        });
      } else {
        const ask: RunAsk = {
          have,
          iterations: run.iterations,
          forwardOnly: run.forwardOnly,
        };
        await sendValue(comm, 0, `${base}/ask`, ask);
        payloads = have ? run.payloads(rank) : await recvValue(comm, 0, `${base}/payload`) as
          | unknown[]
          | undefined;
      }
      const offset = this.#clockOffset;
      const P = this.schedule.ranks;
      const activity = this.#activity(first);
      comm.reportActivity?.(activity.describe);
      const own = await runRank({
        schedule: this.schedule,
        rank: rank % P,
        comm: this.#view,
        ...(this.#sync === undefined ? {} : { gradientSync: this.#sync }),
        executor: this.#executor,
        firstIteration: first,
        iterations: run.iterations,
        payloads,
        forwardOnly: run.forwardOnly,
        abortFlag: this.#abortFlag,
        policy: this.#policy,
        onState: activity.onState,
      }).catch((e) => {
        throw this.replicas === 1 ? e : inGrid(e, Math.floor(rank / P), P);
      });
      // Events on rank 0's clock (shifted here: device spans are dated in
      // this process's performance.now()).
      const share: RankShare = {
        ...own,
        // Events name the global rank.
        events: own.events.map((e) => ({
          ...e,
          rank,
          start: e.start + offset,
          end: e.end + offset,
        })),
      };
      await serving;
      if (refusal !== null) throw refusal;
      const shares = await allGather(comm, `${base}/share`, share);
      const result = assembleRun(this.ranks, first, shares);
      return { ...result, startTime: result.startTime - offset };
    } catch (caught) {
      const e = refusal ?? caught;
      if (!(e instanceof CommAbortedError) && refusal === null) {
        raiseAbort(this.#abortFlag, this.#controller, comm, e);
      }
      const named = this.#lostRank(e);
      this.failedWith = named instanceof Error ? named : new Error(String(named));
      await this.#release();
      throw named;
    } finally {
      this.running = false;
    }
  }

  // What this rank is doing during a run, in words, for the transport's
  // heartbeats: the survivors quote it if this process is lost.
  #activity(first: number): {
    describe: () => string;
    onState: (state: RankState, index: number, iteration: number) => void;
  } {
    const P = this.schedule.ranks;
    const g = this.#comm.rank;
    const list = this.schedule.actions[g % P]; // onState's index is into the whole list
    const place = this.replicas === 1
      ? ""
      : `replica ${Math.floor(g / P)}, pipeline rank ${g % P}, `;
    let state: RankState = "idle", index = -1, iteration = first;
    return {
      onState: (s, i, it) => {
        state = s;
        index = i;
        iteration = it;
      },
      describe: () => {
        const a = list[index];
        if (state === "idle" || state === "done" || a === undefined) {
          return `${place}${
            state === "done" ? "done with" : "between actions of"
          } iteration ${iteration}`;
        }
        const at = `${
          formatAction(a)
        } (stage ${a.stage}, microBatch ${a.microBatch}, iteration ${iteration})`;
        return place +
          (state === "recv"
            ? `waiting for the input of ${at}`
            : state === "compute"
            ? `computing ${at}`
            : this.replicas > 1
            ? `averaging or stepping stage ${a.stage} after ${at}`
            : `in the optimizer step of stage ${a.stage} after ${at}`);
      },
    };
  }

  // A peer process the transport lost, as the rank that failed: a
  // PipelineRankError for that rank (kind "exit"), named in the grid, quoting
  // what it was last heard doing; anything else as it is.
  #lostRank(e: unknown): unknown {
    if (!(e instanceof CommAbortedError) || e.lost === undefined) return e;
    const { rank: q, why } = e.lost;
    const P = this.schedule.ranks;
    const place = this.replicas > 1 && !why.includes("replica ")
      ? `replica ${Math.floor(q / P)}, pipeline rank ${q % P}: `
      : "";
    // "hung: …" and "stalled: …" (silent peers) keep their kind; an ended
    // process exited; one silent elsewhere hung.
    const m = /^(hung|stalled): /.exec(why);
    const out = new PipelineRankError({
      rank: q,
      kind: m === null
        ? why.startsWith("no message") ? "hang" : "exit"
        : m[1] === "hung"
        ? "hang"
        : "stall",
      detail: place + (m === null ? why : why.slice(m[0].length)),
    });
    out.cause = e;
    return out;
  }

  // Rank 0: hears every other rank's ask for this run, checks that they run
  // the same iterations, and sends their payloads to those without (none
  // where rank 0 has none either).
  async #servePayloads(base: string, run: CheckedRun): Promise<void> {
    const comm = this.#comm;
    await Promise.all(Array.from({ length: comm.size - 1 }, async (_, i) => {
      const r = i + 1;
      const ask = await recvValue(comm, r, `${base}/ask`) as RunAsk;
      if (ask.iterations !== run.iterations || ask.forwardOnly !== run.forwardOnly) {
        throw new RangeError(
          `rank ${r} runs ${ask.iterations} iteration(s)${
            ask.forwardOnly ? " forward-only" : ""
          } where rank 0 runs ${run.iterations}${
            run.forwardOnly ? " forward-only" : ""
          }: every process must make the same model calls with as many batches`,
        );
      }
      if (!ask.have) await sendValue(comm, r, `${base}/payload`, run.payloads(r));
    }));
  }

  // Rank `rank` runs `method` with its own `args`; every rank resolves with
  // its result, or rejects with its error (see the module documentation).
  // Every process must make the same calls in the same order.
  /** @ignore */
  protected async answer(rank: number, method: keyof C & string, args: unknown): Promise<unknown> {
    const tag = `spmd${this.#group}/call${++this.#calls}`;
    const comm = this.#comm;
    if (rank !== comm.rank) {
      const reply = await recvValue(comm, rank, tag) as CallReply;
      if (reply.ok) return reply.value;
      throw new Error(`rank ${rank}: ${method} failed: ${reply.message}`);
    }
    let reply: CallReply;
    let error: unknown = null;
    try {
      const handler = this.#executor.calls?.[method];
      if (typeof handler !== "function") {
        throw new TypeError(`the executor of rank ${rank} answers no call "${method}"`);
      }
      reply = { ok: true, value: await handler(args) };
    } catch (e) {
      error = e;
      reply = { ok: false, message: e instanceof Error ? e.message : String(e) };
    }
    await broadcastValue(comm, rank, tag, reply);
    if (error !== null) throw error;
    return (reply as { value: unknown }).value;
  }

  /** Disposes this rank's executor (and closes the transport with `closeComm`). Idempotent. */
  async dispose(): Promise<void> {
    await this.#release();
  }

  #release(): Promise<void> {
    this.isClosed = true;
    this.#comm.reportActivity?.(null);
    this.#disposed ??= (async () => {
      try {
        await this.#executor.dispose?.();
      } finally {
        if (this.#closeComm) this.#comm.close();
      }
    })();
    return this.#disposed;
  }
}
