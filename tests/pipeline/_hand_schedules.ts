// Hand-made schedules for the tests that must refuse them, independent of
// the generators.

import type { Action } from "../../src/pipeline/schedule/action.ts";
import type { Schedule } from "../../src/pipeline/schedule/schedule.ts";

const F = (stage: number, microBatch: number): Action => ({ kind: "F", stage, microBatch });
const B = (stage: number, microBatch: number): Action => ({ kind: "B", stage, microBatch });

/**
 * 2 ranks, 2 micro-batches, one stage each, that deadlocks: rank 1 wants
 * micro-batch 1 first; rank 0 sends it only after the backward of
 * micro-batch 0, which needs rank 1.
 */
export function deadlocked2x2(): Schedule {
  return {
    name: "deadlocked",
    ranks: 2,
    microBatches: 2,
    stagesPerRank: 1,
    stageToRank: [0, 1],
    actions: [[F(0, 0), B(0, 0), F(0, 1), B(0, 1)], [F(1, 1), F(1, 0), B(1, 0), B(1, 1)]],
  };
}
