// Which rank group a model runs on: the `workers` and `rankGroup` options
// (and `comm` with "mpi"), checked together.

import type { RankGroupKind } from "../runtime/rank_group.ts";
import type { CommBackend } from "../comm/backend.ts";

const KINDS: readonly RankGroupKind[] = ["workers", "in-process", "mpi"];

/** The checked choice of rank group. */
export interface RankGroupChoice {
  readonly rankGroup: RankGroupKind;
  readonly comm?: CommBackend;
}

/**
 * Reads `workers`, `rankGroup` and `comm` (TypeError naming the value):
 * `rankGroup` wins, `workers` alone picks workers or in-process, both
 * given must agree; `comm` only with "mpi".
 */
export function checkRankGroup(
  o: { readonly workers?: unknown; readonly rankGroup?: unknown; readonly comm?: unknown },
): RankGroupChoice {
  if (o.workers !== undefined && typeof o.workers !== "boolean") {
    throw new TypeError(`workers must be a boolean, got ${String(o.workers)}`);
  }
  if (o.rankGroup !== undefined && !(KINDS as readonly unknown[]).includes(o.rankGroup)) {
    throw new TypeError(
      `rankGroup must be "workers", "in-process" or "mpi", got ${JSON.stringify(o.rankGroup)}`,
    );
  }
  const fromWorkers: RankGroupKind = o.workers === false ? "in-process" : "workers";
  const rankGroup = (o.rankGroup as RankGroupKind | undefined) ?? fromWorkers;
  if (o.workers !== undefined && (rankGroup === "workers") !== o.workers) {
    throw new TypeError(
      `workers: ${o.workers} contradicts rankGroup: ${JSON.stringify(rankGroup)}; give one of them`,
    );
  }
  if (o.comm !== undefined) {
    if (rankGroup !== "mpi") {
      throw new TypeError(
        `comm is the transport of rankGroup "mpi", but rankGroup is ${JSON.stringify(rankGroup)}`,
      );
    }
    const c = o.comm as Partial<CommBackend> | null;
    if (
      c === null || typeof c !== "object" || typeof c.send !== "function" ||
      typeof c.recv !== "function" || !Number.isInteger(c.rank) || !Number.isInteger(c.size)
    ) {
      throw new TypeError(`comm must be a CommBackend, got ${String(o.comm)}`);
    }
    return { rankGroup, comm: o.comm as CommBackend };
  }
  return { rankGroup };
}
