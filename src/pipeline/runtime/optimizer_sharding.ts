/**
 * ZeRO-1 at run time (optimizer state sharded across the D replicas of a
 * pipeline rank, as DeepSpeed's stage 1 and Megatron's distributed
 * optimizer): each stage's parameters, read as one flat vector of N values
 * in parameter order, are cut into D contiguous shares
 * ({@linkcode shardRange}); replica k owns share k. After the backward,
 * {@linkcode reduceScatterAverage} gives each replica the replicas' average
 * of its own share only (a reduce-scatter in place of the all-reduce, with
 * the same bits as that average); the replica steps its share (its
 * optimizer holds the state of that share only) and
 * {@linkcode ShardedSteps} sends the updated share to the other replicas
 * and writes theirs in (an all-gather), so every replica again holds the
 * whole stage, bit for bit the unsharded step. The stage's check (finite
 * gradients and losses, the sum of squared gradients for clipping) is each
 * share's, combined over the replicas in replica order, so every replica
 * reaches the same verdict.
 *
 * @module
 */

import type { CommBackend } from "../comm/backend.ts";
import type { RankExecutor, StepCheck, StepResultOf } from "./rank_executor.ts";
import { gatherTag, reduceTag } from "./tag.ts";
import { describeValue } from "../../text/describe.ts";

/** Start and end (exclusive) of one replica's share of a flat vector. */
export interface ShardRange {
  /** First index owned. */
  readonly start: number;
  /** One past the last index owned. */
  readonly end: number;
}

/**
 * Replica `replica`'s share of a vector of `total` values cut into
 * `replicas` contiguous shares: `[⌊total·k/D⌋, ⌊total·(k+1)/D⌋)`, so the
 * shares differ by at most one value and cover the vector once.
 *
 * @example
 * ```ts
 * import { shardRange } from "./optimizer_sharding.ts";
 * console.log(shardRange(10, 0, 3), shardRange(10, 2, 3)); // { start: 0, end: 3 } { start: 6, end: 10 }
 * ```
 */
export function shardRange(total: number, replica: number, replicas: number): ShardRange {
  if (!Number.isSafeInteger(total) || total < 0) {
    throw new RangeError(`total must be a non-negative integer, got ${describeValue(total)}`);
  }
  if (!Number.isInteger(replicas) || replicas < 1) {
    throw new RangeError(`replicas must be a positive integer, got ${describeValue(replicas)}`);
  }
  if (!Number.isInteger(replica) || replica < 0 || replica >= replicas) {
    throw new RangeError(
      `replica must be an integer in [0, ${replicas - 1}], got ${describeValue(replica)}`,
    );
  }
  return {
    start: Math.floor(total * replica / replicas),
    end: Math.floor(total * (replica + 1) / replicas),
  };
}

/** Where a rank's replicas are: its own replica k and the global ranks of all D, in replica order. */
export interface ReplicaPeers {
  /** The global transport. */
  readonly comm: CommBackend;
  /** This rank's replica k. */
  readonly replica: number;
  /** Global ranks of the D replicas of this pipeline rank, in replica order. */
  readonly peers: readonly number[];
}

// Each value i of the flat vector `grads` (one array per parameter) at
// position `at + i`, for i in [0, n).
function flatSlice(grads: readonly Float32Array[], start: number, end: number): Float32Array {
  const out = new Float32Array(end - start);
  let base = 0;
  for (const g of grads) {
    const lo = Math.max(start, base), hi = Math.min(end, base + g.length);
    if (lo < hi) out.set(g.subarray(lo - base, hi - base), lo - start);
    base += g.length;
    if (base >= end) break;
  }
  return out;
}

/**
 * The reduce-scatter of one stage's gradients (`grads`, one array per
 * parameter, which it overwrites): sends each other replica j the values
 * of j's share, receives the other replicas' values of this replica's
 * share and writes their average into it, summed in float64 from 0 in
 * replica order, divided by D and rounded once (the bits of the unsharded
 * average). Values outside the share are left as they were. Resolves with
 * `grads`.
 *
 * @example
 * ```ts
 * import { InProcessBackend } from "@conveyor/core/runtime";
 * import { reduceScatterAverage } from "./optimizer_sharding.ts";
 * const comms = InProcessBackend.createGroup(2);
 * const grads = [[new Float32Array([1, 2, 3, 4])], [new Float32Array([3, 6, 5, 8])]];
 * await Promise.all(comms.map((comm, k) =>
 *   reduceScatterAverage({ comm, replica: k, peers: [0, 1] }, 0, 0, 0, grads[k])
 * ));
 * console.log(grads[0][0], grads[1][0]); // Float32Array(4) [ 2, 4, 3, 4 ] Float32Array(4) [ 3, 6, 4, 6 ]
 * for (const c of comms) c.close();
 * ```
 */
export async function reduceScatterAverage(
  place: ReplicaPeers,
  stage: number,
  iteration: number,
  attempt: number,
  grads: readonly Float32Array[],
): Promise<readonly Float32Array[]> {
  const { comm, replica: own, peers } = place;
  const d = peers.length;
  const total = grads.reduce((n, g) => n + g.length, 0);
  const tag = reduceTag(iteration, attempt, stage, 0);
  const sends: Promise<void>[] = [];
  for (let j = 0; j < d; j++) {
    if (j === own) continue;
    const { start, end } = shardRange(total, j, d);
    const sent = comm.send(peers[j], tag, flatSlice(grads, start, end), { transfer: true });
    sent.catch(() => {}); // awaited below
    sends.push(sent);
  }
  const { start, end } = shardRange(total, own, d);
  const n = end - start;
  const parts: Float32Array[] = new Array(d);
  for (let j = 0; j < d; j++) {
    if (j === own) continue;
    const r = await comm.recv(peers[j], tag);
    if (!(r instanceof Float32Array) || r.length !== n) {
      throw new RangeError(
        `replica ${j}'s share of stage ${stage}'s gradients must be a Float32Array of ${n} ` +
          `values, got ${r instanceof Float32Array ? r.length : typeof r}`,
      );
    }
    parts[j] = r;
  }
  parts[own] = flatSlice(grads, start, end);
  const sum = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) s += parts[k][i];
    sum[i] = s / d;
  }
  // Back into the per-parameter arrays.
  let base = 0;
  for (const g of grads) {
    const lo = Math.max(start, base), hi = Math.min(end, base + g.length);
    if (lo < hi) g.set(sum.subarray(lo - start, hi - start), lo - base);
    base += g.length;
  }
  await Promise.all(sends);
  return grads;
}

// The check's fields travel in front of the share as 4 float64 values
// (8 float32 slots): normSquared (NaN: none), finite (1, 0; −1: no check),
// what (0 none, 1 loss, 2 gradient), microBatch (−1: none).
const HEAD = 8;

function encode(check: StepCheck | undefined, share: Float32Array): Float32Array {
  const buf = new ArrayBuffer(HEAD * 4 + share.byteLength);
  const head = new Float64Array(buf, 0, HEAD / 2);
  head[0] = check?.normSquared ?? NaN;
  head[1] = check === undefined ? -1 : check.finite ? 1 : 0;
  head[2] = check?.what === "loss" ? 1 : check?.what === "gradient" ? 2 : 0;
  head[3] = check?.microBatch ?? -1;
  new Float32Array(buf, HEAD * 4).set(share);
  return new Float32Array(buf);
}

function decodeCheck(msg: Float32Array): StepCheck | undefined {
  const head = new Float64Array(msg.slice(0, HEAD).buffer);
  if (head[1] < 0) return undefined;
  return {
    finite: head[1] === 1,
    ...(head[2] === 1
      ? { what: "loss" as const }
      : head[2] === 2
      ? { what: "gradient" as const }
      : {}),
    ...(head[3] >= 0 ? { microBatch: head[3] } : {}),
    ...(Number.isNaN(head[0]) && head[1] === 1 ? {} : { normSquared: head[0] }),
  };
}

/**
 * The replicas' checks of one stage as one: finite where every share was,
 * the first non-finite share's `what` and `microBatch` (replica order), and
 * the shares' sums of squared gradients added in replica order.
 */
function combineChecks(checks: readonly (StepCheck | undefined)[]): StepCheck | undefined {
  if (checks.every((c) => c === undefined)) return undefined;
  let normSquared: number | undefined;
  let bad: StepCheck | undefined;
  for (const c of checks) {
    if (c === undefined) continue;
    if (c.normSquared !== undefined) normSquared = (normSquared ?? 0) + c.normSquared;
    if (!c.finite && bad === undefined) bad = c;
  }
  return {
    finite: bad === undefined,
    ...(bad?.what === undefined ? {} : { what: bad.what }),
    ...(bad?.microBatch === undefined ? {} : { microBatch: bad.microBatch }),
    ...(normSquared === undefined ? {} : { normSquared }),
  };
}

/**
 * The executor methods ZeRO-1 needs besides the usual ones: the replica's
 * updated share of a stage's flat parameter vector after its step (or its
 * redo), and the whole vector written back.
 */
export type ShardedExecutor = Pick<
  RankExecutor,
  "step" | "redoStep" | "ownedParameters" | "setStageParameters"
>;

/**
 * One rank's side of ZeRO-1's all-gather: {@linkcode ShardedSteps.wrap}
 * gives an executor whose `step` and `redoStep` also send the updated
 * share to the other replicas and write theirs in, the stage's check
 * combined over the replicas. The exchange runs while the rank goes on;
 * {@linkcode ShardedSteps.settle} waits for every exchange started (the
 * runtime calls it at each iteration's start and end, so a stage's next
 * forward sees the whole updated stage).
 *
 * @example
 * ```ts
 * import { InProcessBackend } from "@conveyor/core/runtime";
 * import { type ShardedExecutor, ShardedSteps } from "./optimizer_sharding.ts";
 * const comms = InProcessBackend.createGroup(2);
 * const flat = [new Float32Array(4), new Float32Array(4)];
 * const ranks = comms.map((comm, k) => {
 *   const sync = new ShardedSteps({ comm, replica: k, peers: [0, 1] });
 *   sync.setTotal(0, 4);
 *   const ex = sync.wrap<ShardedExecutor>({
 *     step: () => ({ finite: true, normSquared: k + 1 }),
 *     ownedParameters: () => new Float32Array([10 * k + 1, 10 * k + 2]),
 *     setStageParameters: (_s: number, v: Float32Array) => void flat[k].set(v),
 *   });
 *   return { sync, ex };
 * });
 * const checks = await Promise.all(ranks.map(async ({ ex }) => {
 *   const out = await ex.step(0, 0) as { check: Promise<unknown> };
 *   return await out.check;
 * }));
 * await Promise.all(ranks.map(({ sync }) => sync.settle()));
 * console.log(flat[1], checks[0]); // Float32Array(4) [ 1, 2, 11, 12 ] { finite: true, normSquared: 3 }
 * for (const c of comms) c.close();
 * ```
 */
export class ShardedSteps {
  readonly #place: ReplicaPeers;
  readonly #totals = new Map<number, number>();
  #pending: Promise<unknown>[] = [];

  /** The all-gather of the rank at `place` among its replicas. */
  constructor(place: ReplicaPeers) {
    this.#place = place;
  }

  /** Records the length N of `stage`'s flat parameter vector (its gradients' total length). */
  setTotal(stage: number, total: number): void {
    this.#totals.set(stage, total);
  }

  /**
   * `executor` with `step` and `redoStep` followed by the all-gather of the
   * stage's updated shares; every other member as it is.
   *
   * @throws {TypeError} When the executor lacks `ownedParameters` or `setStageParameters`.
   */
  wrap<E extends ShardedExecutor>(executor: E): E {
    if (
      typeof executor.ownedParameters !== "function" ||
      typeof executor.setStageParameters !== "function"
    ) {
      throw new TypeError(
        "a sharded optimizer needs an executor with ownedParameters(stage) and " +
          "setStageParameters(stage, values)",
      );
    }
    const step = async (stage: number, iteration: number): Promise<StepResultOf> => {
      const out = await executor.step(stage, iteration);
      const check = out === undefined || out === null
        ? Promise.resolve(undefined)
        : "check" in out
        ? Promise.resolve(out.check)
        : Promise.resolve(out as StepCheck);
      const combined = this.#track(this.#gather(executor, stage, iteration, false, check));
      if (out === undefined || out === null) return undefined;
      return { check: combined.then((c) => c!) };
    };
    const redoStep = async (stage: number, iteration: number, scale: number) => {
      await executor.redoStep?.(stage, iteration, scale);
      this.#track(this.#gather(executor, stage, iteration, true, Promise.resolve(undefined)));
    };
    return new Proxy(executor, {
      get(target, prop, receiver) {
        if (prop === "step") return step;
        if (prop === "redoStep" && target.redoStep !== undefined) return redoStep;
        const v = Reflect.get(target, prop, receiver);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
  }

  /** Waits for every exchange started so far; rejects with the first failure. */
  async settle(): Promise<void> {
    while (this.#pending.length > 0) {
      const all = this.#pending;
      this.#pending = [];
      await Promise.all(all);
    }
  }

  #track<T>(p: Promise<T>): Promise<T> {
    p.catch(() => {}); // seen by settle()
    this.#pending.push(p);
    return p;
  }

  async #gather(
    executor: ShardedExecutor,
    stage: number,
    iteration: number,
    redo: boolean,
    check: Promise<StepCheck | undefined>,
  ): Promise<StepCheck | undefined> {
    const { comm, replica: own, peers } = this.#place;
    const d = peers.length;
    const total = this.#totals.get(stage);
    if (total === undefined) {
      throw new Error(`stage ${stage} stepped before its gradients were reduce-scattered`);
    }
    const mine = await executor.ownedParameters!(stage);
    const range = shardRange(total, own, d);
    if (!(mine instanceof Float32Array) || mine.length !== range.end - range.start) {
      throw new RangeError(
        `ownedParameters(${stage}) must give this replica's ${
          range.end - range.start
        } values, got ${mine instanceof Float32Array ? mine.length : typeof mine}`,
      );
    }
    const myCheck = await check;
    const tag = gatherTag(iteration, stage, redo);
    const sends: Promise<void>[] = [];
    for (let j = 0; j < d; j++) {
      if (j === own) continue;
      const sent = comm.send(peers[j], tag, encode(myCheck, mine), { transfer: true });
      sent.catch(() => {});
      sends.push(sent);
    }
    const flat = new Float32Array(total);
    flat.set(mine, range.start);
    const checks: (StepCheck | undefined)[] = new Array(d);
    checks[own] = myCheck;
    for (let j = 0; j < d; j++) {
      if (j === own) continue;
      const r = await comm.recv(peers[j], tag);
      const { start, end } = shardRange(total, j, d);
      if (!(r instanceof Float32Array) || r.length !== HEAD + end - start) {
        throw new RangeError(
          `replica ${j}'s share of stage ${stage}'s parameters must be ${end - start} values ` +
            `after a ${HEAD}-value head, got ${r instanceof Float32Array ? r.length : typeof r}`,
        );
      }
      flat.set(r.subarray(HEAD), start);
      checks[j] = decodeCheck(r);
    }
    await executor.setStageParameters!(stage, flat);
    await Promise.all(sends);
    return combineChecks(checks);
  }
}
