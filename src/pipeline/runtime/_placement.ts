// Placement helpers shared by the runner, the worker and the groups.

import type { Schedule } from "../schedule/schedule.ts";
import type { RankExecutorInit } from "./rank_executor.ts";

/** Global stages placed on `rank`, ascending. */
export function stagesOf(schedule: Schedule, rank: number): number[] {
  const out: number[] = [];
  schedule.stageToRank.forEach((r, s) => {
    if (r === rank) out.push(s);
  });
  return out;
}

/** A group's executor options for `rank`: `options(rank)` where they are a function. */
export function optionsFor(options: unknown, rank: number): unknown {
  return typeof options === "function" ? options(rank) : options;
}

/** The init of rank `rank`'s executor: its place in `schedule`, then what its group gives it. */
export function executorInit(
  schedule: Schedule,
  rank: number,
  given: Pick<RankExecutorInit, "options" | "abortFlag" | "signal" | "comm">,
): RankExecutorInit {
  return {
    rank,
    ranks: schedule.ranks,
    stages: stagesOf(schedule, rank),
    numStages: schedule.stageToRank.length,
    microBatches: schedule.microBatches,
    options: given.options,
    abortFlag: given.abortFlag,
    signal: given.signal,
    comm: given.comm,
  };
}
