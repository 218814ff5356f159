// Micro-batches each stage holds at once under a schedule, counted as
// CheckpointedStage counts them for its maxActivationsInMemory cap: a
// micro-batch is held from its F until its backward has freed it, i.e. its B
// (fused) or its W (I/W split: the I keeps what the W needs). Each rank runs
// its list in order, one iteration after the other, so one walk of one
// iteration per rank is exact. Not exported from the package.

import type { Schedule } from "../schedule/schedule.ts";

/** Peak micro-batches in flight per global stage (index = stage) of a valid schedule. */
export function inFlightPeaks(schedule: Schedule): number[] {
  const stages = schedule.stageToRank.length;
  const held = new Array<number>(stages).fill(0);
  const peak = new Array<number>(stages).fill(0);
  for (const list of schedule.actions) {
    for (const a of list) {
      if (a.kind === "F") {
        held[a.stage]++;
        if (held[a.stage] > peak[a.stage]) peak[a.stage] = held[a.stage];
      } else if (a.kind === "B" || a.kind === "W") {
        held[a.stage]--;
      }
    }
  }
  return peak;
}

/**
 * Throws a RangeError when `cap` (0 = no cap) is below the peak of some
 * stage: the first step would fail at that stage's forward. Names the stage
 * with the highest peak (the lowest such stage on ties).
 */
export function checkInFlightCap(schedule: Schedule, cap: number): void {
  if (cap <= 0) return;
  const peaks = inFlightPeaks(schedule);
  let worst = 0;
  for (let s = 1; s < peaks.length; s++) if (peaks[s] > peaks[worst]) worst = s;
  if (peaks[worst] <= cap) return;
  const { name, ranks, stagesPerRank: V, microBatches: m } = schedule;
  const shape = V > 1 ? `p = ${ranks}, V = ${V}, m = ${m}` : `p = ${ranks}, m = ${m}`;
  const peak = peaks[worst];
  throw new RangeError(
    `checkpoint.maxActivationsInMemory = ${cap} is below the ${peak} micro-batches stage ` +
      `${worst} holds at once under ${name} (${shape}); raise it to at least ${peak} ` +
      "or use 0 (no cap)",
  );
}
