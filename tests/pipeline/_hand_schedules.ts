// Hand-made schedules, independent of the generators: for the tests that
// must refuse them and those that need a placement no generator makes.

import type { Action } from "../../src/pipeline/schedule/action.ts";
import type { Schedule } from "../../src/pipeline/schedule/schedule.ts";

/**
 * A schedule of one stage per rank (stage r on rank r) from each rank's
 * actions written as text, e.g. "1F0" (stage, kind, micro-batch).
 */
function handMade(name: string, actions: readonly string[][]): Schedule {
  const parsed = actions.map((row) =>
    row.map((text): Action => ({
      kind: text[1] as Action["kind"],
      stage: Number(text[0]),
      microBatch: Number(text[2]),
    }))
  );
  return {
    name,
    ranks: actions.length,
    microBatches: 1 + Math.max(...parsed.flat().map((a) => a.microBatch)),
    stagesPerRank: 1,
    stageToRank: actions.map((_, r) => r),
    actions: parsed,
  };
}

/**
 * 2 ranks, 2 micro-batches, that deadlocks: rank 1 wants micro-batch 1
 * first; rank 0 sends it only after the backward of micro-batch 0, which
 * needs rank 1.
 */
export function deadlocked2x2(): Schedule {
  return handMade("deadlocked", [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1F0", "1B0", "1B1"]]);
}

/**
 * 2 ranks, 2 micro-batches; rank 1 splits its backward and defers both W
 * passes, so stage 1 holds micro-batches 0 and 1 at once (0 is freed only
 * by its W, after 1's forward) while stage 0 never holds more than one.
 */
export function deferredW(): Schedule {
  return handMade("deferred-w", [
    ["0F0", "0B0", "0F1", "0B1"],
    ["1F0", "1I0", "1F1", "1I1", "1W0", "1W1"],
  ]);
}
