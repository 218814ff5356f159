// Placement helpers shared by the runner, the worker and the pool.

import type { Schedule } from "../schedule/schedule.ts";

/** Global stages placed on `rank`, ascending. */
export function stagesOf(schedule: Schedule, rank: number): number[] {
  const out: number[] = [];
  schedule.stageToRank.forEach((r, s) => {
    if (r === rank) out.push(s);
  });
  return out;
}
