// Hand-built timelines for renderer tests, independent of the simulator.

import type { Action, ActionKind } from "../../src/pipeline/schedule/action.ts";
import type { TimedEvent } from "../../src/pipeline/schedule/schedule.ts";

/** Shorthand: event on `rank` running `kind` of (stage, micro-batch) over [start, end). */
export function ev(
  rank: number,
  kind: ActionKind,
  stage: number,
  microBatch: number,
  start: number,
  end: number,
  iteration = 0,
): TimedEvent {
  const action: Action = { kind, stage, microBatch };
  return { rank, action, iteration, start, end };
}

/**
 * GPipe on 2 ranks with 2 micro-batches, F = 1, full B = 2, written out by
 * hand: rank 0 forwards at 0 and 1, rank 1 at 1 and 2; rank 1 backwards at
 * 3–5 and 5–7, rank 0 at 5–7 and 7–9.
 */
export function gpipe2x2(): TimedEvent[] {
  return [
    ev(0, "F", 0, 0, 0, 1),
    ev(0, "F", 0, 1, 1, 2),
    ev(1, "F", 1, 0, 1, 2),
    ev(1, "F", 1, 1, 2, 3),
    ev(1, "B", 1, 0, 3, 5),
    ev(1, "B", 1, 1, 5, 7),
    ev(0, "B", 0, 0, 5, 7),
    ev(0, "B", 0, 1, 7, 9),
  ];
}

/**
 * A zero-bubble-style split timeline on 2 ranks, 2 micro-batches, with a
 * second stage on each rank (V shape: rank 0 holds stages 0 and 3, rank 1
 * holds 1 and 2), all passes of length 1.
 */
export function splitV2x2(): TimedEvent[] {
  return [
    ev(0, "F", 0, 0, 0, 1),
    ev(0, "F", 0, 1, 1, 2),
    ev(1, "F", 1, 0, 1, 2),
    ev(1, "F", 2, 0, 2, 3),
    ev(1, "F", 1, 1, 3, 4),
    ev(0, "F", 3, 0, 3, 4),
    ev(0, "I", 3, 0, 4, 5),
    ev(1, "F", 2, 1, 4, 5),
    ev(0, "F", 3, 1, 5, 6),
    ev(1, "I", 2, 0, 5, 6),
    ev(0, "I", 3, 1, 6, 7),
    ev(1, "I", 1, 0, 6, 7),
    ev(0, "I", 0, 0, 7, 8),
    ev(1, "I", 2, 1, 7, 8),
    ev(1, "I", 1, 1, 8, 9),
    ev(0, "W", 3, 0, 8, 9),
    ev(0, "I", 0, 1, 9, 10),
    ev(1, "W", 2, 0, 9, 10),
    ev(0, "W", 3, 1, 10, 11),
    ev(1, "W", 1, 0, 10, 11),
    ev(0, "W", 0, 0, 11, 12),
    ev(1, "W", 2, 1, 11, 12),
    ev(0, "W", 0, 1, 12, 13),
    ev(1, "W", 1, 1, 12, 13),
  ];
}
