/**
 * Data × pipeline parallelism at run time: D copies (replicas) of a
 * P-rank pipeline on D·P ranks, global rank `k·P + p` running pipeline
 * rank `p` of replica `k`. Each replica's pipeline talks through a
 * {@linkcode ReplicaComm} (a view of the global transport that maps
 * pipeline rank `p` to global rank `k·P + p`); the D ranks that hold
 * pipeline rank `p` average the gradients of the stages that rank holds
 * through a {@linkcode GradientSync}, which the interpreter starts as soon
 * as a stage's own last backward of the step is done; the stage steps once
 * its average is in, while its rank goes on with its other stages: no
 * barrier across stages.
 *
 * @module
 */

import type { CommBackend, ControlHandler, ControlMessage, SendOptions } from "../comm/backend.ts";
import { packBucket, planBuckets } from "../comm/gradient_reduce.ts";
import type { RankExecutor } from "./rank_executor.ts";
import { reduceTag } from "./tag.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";
import { reduceScatterAverage, ShardedSteps } from "./optimizer_sharding.ts";
import { describeValue } from "../../text/describe.ts";

/** Default size of one gradient bucket: 1 MiB (262 144 f32 values). */
export const DEFAULT_BUCKET_BYTES: number = 1 << 20;

/** Where a global rank sits in the D × P grid. */
export interface GridPlace {
  /** Replica k, `0 … D−1`. */
  readonly replica: number;
  /** Pipeline rank p, `0 … P−1`. */
  readonly pipelineRank: number;
}

/**
 * The place of global rank `rank` in a grid of pipelines of `pipelineRanks`
 * ranks: replica `floor(rank / P)`, pipeline rank `rank mod P`.
 *
 * @example
 * ```ts
 * import { gridPlace } from "./gradient_sync.ts";
 * console.log(gridPlace(5, 2)); // { replica: 2, pipelineRank: 1 }
 * ```
 */
export function gridPlace(rank: number, pipelineRanks: number): GridPlace {
  return { replica: Math.floor(rank / pipelineRanks), pipelineRank: rank % pipelineRanks };
}

/** Throws a RangeError unless `d` is a positive integer (the replica count D). */
export function checkReplicas(d: unknown, what = "dataParallel"): number {
  if (typeof d !== "number" || !Number.isInteger(d) || d < 1) {
    throw new RangeError(
      `${what} must be a positive integer (the replicas D), got ${describeValue(d)}`,
    );
  }
  return d;
}

/**
 * One replica's view of a global transport: rank `p` and size `P` of its
 * own pipeline, peer `q` sent to and received from global rank
 * `replica·P + q`. Control messages, abort and discard act on the global
 * transport (an abort ends every replica); `close` leaves it open (its
 * owner closes it); `barrier` is refused (the runtime takes none).
 *
 * @example
 * ```ts
 * import { InProcessBackend } from "@conveyor/core/runtime";
 * import { ReplicaComm } from "./gradient_sync.ts";
 * const global = InProcessBackend.createGroup(4); // D = 2 replicas of P = 2
 * const view = new ReplicaComm(global[3], 1, 2);
 * console.log(view.rank, view.size); // 1 2
 * await new ReplicaComm(global[2], 1, 2).send(1, "x", new Float32Array([7]));
 * console.log(await view.recv(0, "x")); // Float32Array(1) [ 7 ]
 * for (const c of global) c.close();
 * ```
 */
export class ReplicaComm implements CommBackend {
  /** The global transport. */
  readonly global: CommBackend;
  /** This replica. */
  readonly replica: number;
  /** Pipeline rank p. */
  readonly rank: number;
  /** Pipeline ranks P. */
  readonly size: number;

  /** The view of replica `replica` of pipelines of `pipelineRanks` ranks over `global`. */
  constructor(global: CommBackend, replica: number, pipelineRanks: number) {
    if (global.size % pipelineRanks !== 0 || global.size < pipelineRanks) {
      throw new RangeError(
        `a transport of ${global.size} ranks holds no whole number of ${pipelineRanks}-rank pipelines`,
      );
    }
    const p = gridPlace(global.rank, pipelineRanks);
    if (p.replica !== replica) {
      throw new RangeError(
        `global rank ${global.rank} is in replica ${p.replica}, not replica ${replica}`,
      );
    }
    this.global = global;
    this.replica = replica;
    this.rank = p.pipelineRank;
    this.size = pipelineRanks;
  }

  /** Whether the global transport was aborted. */
  get aborted(): boolean {
    return this.global.aborted;
  }

  #peer(peer: number): number {
    if (!Number.isInteger(peer) || peer < 0 || peer >= this.size) {
      throw new RangeError(
        `peer must be a pipeline rank in [0, ${this.size - 1}], got ${describeValue(peer)}`,
      );
    }
    return this.replica * this.size + peer;
  }

  /** Sends to pipeline rank `peer` of this replica. */
  send(
    peer: number,
    tag: string,
    data: Float32Array | PromiseLike<Float32Array>,
    options?: SendOptions,
  ): Promise<void> {
    return this.global.send(this.#peer(peer), tag, data, options);
  }

  /** Receives from pipeline rank `peer` of this replica. */
  recv(peer: number, tag: string): Promise<Float32Array> {
    return this.global.recv(this.#peer(peer), tag);
  }

  /** See {@linkcode CommBackend.discard} (on the global transport). */
  discard(match: (tag: string) => boolean): number {
    return this.global.discard(match);
  }

  /** Refused: a replica's pipeline takes no barrier of its own. */
  barrier(): Promise<void> {
    return Promise.reject(new Error("a replica's view of the transport has no barrier"));
  }

  /** See {@linkcode CommBackend.broadcastControl} (every global rank). */
  broadcastControl(message: ControlMessage): void {
    this.global.broadcastControl(message);
  }

  /** See {@linkcode CommBackend.onControl}. */
  onControl(handler: ControlHandler): () => void {
    return this.global.onControl(handler);
  }

  /** Aborts the global transport (every replica). */
  abort(reason: string): void {
    this.global.abort(reason);
  }

  /** Leaves the global transport open: its owner closes it. */
  close(): void {}
}

/** Options of {@linkcode GradientSync}. */
export interface GradientSyncOptions {
  /** The global transport of the D·P ranks. */
  readonly comm: CommBackend;
  /** Replicas D. */
  readonly replicas: number;
  /** Pipeline ranks P. */
  readonly pipelineRanks: number;
  /** Bucket size in bytes (default {@linkcode DEFAULT_BUCKET_BYTES}). */
  readonly bucketBytes?: number;
  /**
   * ZeRO-1: each replica owns 1/D of each stage's optimizer state, so the
   * average is a reduce-scatter (each replica gets its share's average) and
   * the steps are followed by an all-gather of the updated shares
   * ({@linkcode GradientSync.sharding}). Default false.
   */
  readonly shardOptimizer?: boolean;
}

/**
 * The gradient average of one global rank's stages across the D replicas:
 * {@linkcode GradientSync.reduce} takes a stage's gradients from the
 * executor, cuts them into buckets ({@linkcode planBuckets}), sends each
 * bucket to the D−1 other ranks holding the same pipeline rank, averages
 * the D buffers of each bucket in replica order (as `BucketAverage`:
 * f64 sums, one rounding) and hands the average back to the executor.
 * Every replica computes the same sums in the same order, so every
 * replica's stage ends with the same bits.
 *
 * @example
 * ```ts
 * import { InProcessBackend } from "@conveyor/core/runtime";
 * import { GradientSync } from "./gradient_sync.ts";
 * const comms = InProcessBackend.createGroup(2); // D = 2, P = 1
 * const grads: Float32Array[][] = [[new Float32Array([1, 2])], [new Float32Array([3, 6])]];
 * await Promise.all(comms.map((comm, k) =>
 *   new GradientSync({ comm, replicas: 2, pipelineRanks: 1 }).reduce(0, 0, 0, {
 *     gradients: () => grads[k].map((g) => g.slice()), // copies (see RankExecutor.gradients)
 *     setGradients: (_s: number, g: readonly Float32Array[]) => void (grads[k] = [...g]),
 *   })
 * ));
 * console.log(grads[0][0], grads[1][0]); // Float32Array(2) [ 2, 4 ] Float32Array(2) [ 2, 4 ]
 * for (const c of comms) c.close();
 * ```
 */
export class GradientSync {
  /** This rank's replica k. */
  readonly replica: number;
  /** Replicas D. */
  readonly replicas: number;
  /** Global ranks of the D replicas of this pipeline rank, in replica order. */
  readonly peers: readonly number[];
  /**
   * With `shardOptimizer` (and D > 1): the all-gather after each step,
   * whose `wrap` the runtime puts around the executor; else null.
   */
  readonly sharding: ShardedSteps | null;
  readonly #comm: CommBackend;
  readonly #bucketBytes: number;
  readonly #plans = new Map<number, ReturnType<typeof planBuckets>>();
  // Per stage and bucket, the buffers the other replicas sent last time,
  // kept to pack this rank's next sends into (at most D − 1 each): in a
  // steady run a rank receives as many buffers of a bucket as it sends, so
  // the exchange allocates nothing after its first step. Fresh buffers of
  // a few MiB every step kept V8 collecting (its young generation counts
  // their bytes): that cost a (2, 1) step of the tiny GPT ~25 ms.
  readonly #spare = new Map<number, Float32Array[][]>();

  /** The average of `options.comm`'s rank across its replicas. */
  constructor(options: GradientSyncOptions) {
    const { comm, pipelineRanks } = options;
    const d = checkReplicas(options.replicas, "replicas");
    if (comm.size !== d * pipelineRanks) {
      throw new RangeError(
        `the transport has ${comm.size} ranks, not D·P = ${d}·${pipelineRanks}`,
      );
    }
    const place = gridPlace(comm.rank, pipelineRanks);
    this.#comm = comm;
    this.replica = place.replica;
    this.replicas = d;
    this.peers = Array.from({ length: d }, (_, k) => k * pipelineRanks + place.pipelineRank);
    this.#bucketBytes = options.bucketBytes ?? DEFAULT_BUCKET_BYTES;
    this.sharding = options.shardOptimizer === true && d > 1
      ? new ShardedSteps({ comm, replica: this.replica, peers: this.peers })
      : null;
  }

  /**
   * Averages `stage`'s gradients of `iteration` (attempt `attempt`) across
   * the replicas and writes the average back through the executor. With one
   * replica it does nothing.
   */
  async reduce(
    stage: number,
    iteration: number,
    attempt: number,
    executor: Pick<RankExecutor, "gradients" | "setGradients">,
  ): Promise<void> {
    await this.start(stage, iteration, attempt, executor)?.finish();
  }

  /**
   * Starts the average of `stage`'s gradients of `iteration` (attempt
   * `attempt`): reads them from the executor now, sends this replica's
   * buckets and averages the others' as they come in, without the caller
   * waiting, so that the rank can go on with its other stages' actions.
   * `finish()` writes the average back through the executor (the only other
   * executor call), once it is complete. Null with one replica.
   *
   * @throws {TypeError} When the executor has no `gradients` or `setGradients`.
   */
  start(
    stage: number,
    iteration: number,
    attempt: number,
    executor: Pick<RankExecutor, "gradients" | "setGradients">,
  ): PendingAverage | null {
    if (this.replicas === 1) return null;
    if (typeof executor.gradients !== "function" || typeof executor.setGradients !== "function") {
      throw new TypeError(
        "data parallelism needs an executor with gradients(stage) and setGradients(stage, grads)",
      );
    }
    const grads = executor.gradients(stage);
    let ready = false;
    const sharding = this.sharding;
    const average =
      (sharding === null
        ? this.#average(stage, iteration, attempt, grads)
        : Promise.resolve(grads).then((g) => {
          sharding.setTotal(stage, g.reduce((n, a) => n + a.length, 0));
          return reduceScatterAverage(
            { comm: this.#comm, replica: this.replica, peers: this.peers },
            stage,
            iteration,
            attempt,
            unaliased(g),
          );
        })).finally(() => ready = true);
    average.catch(() => {}); // seen by finish(); an abandoned attempt never calls it
    return {
      get ready() {
        return ready;
      },
      finish: async () => await executor.setGradients!(stage, await average),
    };
  }

  // Sends this rank's buckets of `stage` and averages the D replicas' in
  // replica order as they come in.
  async #average(
    stage: number,
    iteration: number,
    attempt: number,
    gradients: readonly Float32Array[] | Promise<readonly Float32Array[]>,
  ): Promise<readonly Float32Array[]> {
    const grads = unaliased(await gradients);
    let plan = this.#plans.get(stage);
    if (plan === undefined) {
      plan = planBuckets(grads.map((g) => g.length), this.#bucketBytes);
      this.#plans.set(stage, plan);
    }
    const own = this.replica, d = this.replicas;
    let spare = this.#spare.get(stage);
    if (spare === undefined) {
      spare = plan.map(() => []);
      this.#spare.set(stage, spare);
    }
    // Each bucket packed once per other replica into a spare buffer (or a
    // new one) and handed over (no second copy); this rank's own values are
    // read in place for the average.
    const sends: Promise<void>[] = [];
    const tags = plan.map((bucket, b) => {
      const tag = reduceTag(iteration, attempt, stage, b);
      for (let k = 0; k < d; k++) {
        if (k !== own) {
          const buf = packBucket(bucket, grads, spare[b].pop());
          const sent = this.#comm.send(this.peers[k], tag, buf, { transfer: true });
          sent.catch(() => {}); // a failed receive may come first: awaited below, never unhandled
          sends.push(sent);
        }
      }
      return tag;
    });
    const parts: Float32Array[] = new Array(d);
    for (let b = 0; b < plan.length; b++) {
      const bucket = plan[b];
      const received: (Float32Array | null)[] = new Array(d).fill(null);
      for (let k = 0; k < d; k++) {
        if (k === own) continue;
        const r = await this.#comm.recv(this.peers[k], tags[b]);
        if (!(r instanceof Float32Array) || r.length !== bucket.length) {
          throw new RangeError(
            `replica ${k}'s bucket ${b} of stage ${stage} must be a Float32Array of ${bucket.length} ` +
              `values, got ${r instanceof Float32Array ? r.length : typeof r}`,
          );
        }
        received[k] = r;
      }
      // The average goes into this rank's own copy (the executor's
      // `gradients` gave copies for the runtime to keep): value i of every
      // part is read before value i is written.
      let at = 0;
      for (const seg of bucket.segments) {
        const n = seg.end - seg.start;
        const mine = grads[seg.param].subarray(seg.start, seg.end);
        for (let k = 0; k < d; k++) parts[k] = received[k]?.subarray(at, at + n) ?? mine;
        averageInto(parts, mine);
        at += n;
      }
      for (const r of received) {
        if (r !== null && spare[b].length < d - 1 && ownsWholeBuffer(r)) spare[b].push(r);
      }
    }
    await Promise.all(sends);
    return grads;
  }
}

// `grads`, with a copy in place of each array that shares its buffer with
// an earlier one (a tied parameter, views of one array): the average is
// written in place, and two views of one buffer would see each other's
// averaged values.
function unaliased(grads: readonly Float32Array[]): readonly Float32Array[] {
  const seen = new Set<ArrayBufferLike>();
  let out: Float32Array[] | null = null;
  grads.forEach((g, i) => {
    if (!(g instanceof Float32Array)) return; // planBuckets and packBucket name it
    if (seen.has(g.buffer)) (out ??= [...grads])[i] = g.slice();
    else seen.add(g.buffer);
  });
  return out ?? grads;
}

// Whether a received array is the whole of a buffer of its own (what the
// built-in transports deliver), so that packing the next sends into it
// can overwrite nothing anyone else reads.
function ownsWholeBuffer(a: Float32Array): boolean {
  return a.buffer instanceof ArrayBuffer && a.byteOffset === 0 &&
    a.byteLength === a.buffer.byteLength;
}

/** A stage's gradient average under way (see {@linkcode GradientSync.start}). */
export interface PendingAverage {
  /** True once the average is complete (or has failed): `finish()` then waits for no peer. */
  readonly ready: boolean;
  /** Writes the average back through the executor once it is complete; rejects with its failure. */
  finish(): Promise<void>;
}

// `(parts[0] + … + parts[D−1]) / D` per value into `out`: summed in float64
// from 0 in replica order, divided by D, rounded to float32 once (the same
// bits as `BucketAverage`).
function averageInto(parts: readonly Float32Array[], out: Float32Array): void {
  const d = parts.length, n = out.length;
  if (d === 2) {
    // The common case without the loop over parts (~4x faster); the same
    // bits: 0 + a is a, and a + b of two f32 values is one f64 sum.
    const a = parts[0], b = parts[1];
    for (let i = 0; i < n; i++) out[i] = (a[i] + b[i]) / 2;
    return;
  }
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) s += parts[k][i];
    out[i] = s / d;
  }
}

/**
 * A failure of pipeline rank `p` of replica `k` named in the grid: a
 * {@linkcode PipelineRankError} again, with global rank `k·P + p` and the
 * replica and pipeline rank before its detail; anything else as it is.
 *
 * @example
 * ```ts
 * import { PipelineRankError } from "@conveyor/core/runtime";
 * import { inGrid } from "./gradient_sync.ts";
 * const e = inGrid(new PipelineRankError({ rank: 1, kind: "error", detail: "boom" }), 1, 2);
 * console.log((e as Error).message); // "rank 3 failed: replica 1, pipeline rank 1: boom"
 * ```
 */
export function inGrid(e: unknown, replica: number, pipelineRanks: number): unknown {
  if (!(e instanceof PipelineRankError) || e.detail.startsWith("replica ")) return e;
  const g = replica * pipelineRanks + e.rank;
  const out = new PipelineRankError({
    rank: g,
    kind: e.kind,
    ...(e.action === undefined ? {} : { action: e.action }),
    ...(e.iteration === undefined ? {} : { iteration: e.iteration }),
    ...(e.between === true ? { between: true } : {}),
    detail: `replica ${replica}, pipeline rank ${e.rank}: ${e.detail}`,
  });
  return out;
}
