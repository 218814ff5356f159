/**
 * Schedule validation: structure (every stage and micro-batch in range, each
 * action on the rank that holds its stage, one F and either one B or one I
 * and one W per stage and micro-batch) and a dry run with blocking
 * receives that finds deadlocks.
 *
 * @module
 */

import { type Action, formatAction } from "../schedule/action.ts";
import type { Schedule } from "../schedule/schedule.ts";
import { runSchedule, type Stall } from "../schedule/engine.ts";
import { checkStructure, structureError } from "./_structure.ts";
import type { StageCosts } from "../schedule/costs.ts";
import type { ScheduleProblem } from "./schedule_problem.ts";

export type { ScheduleProblem, ScheduleProblemKind } from "./schedule_problem.ts";

/** Where one rank stands still in a deadlocked schedule. */
export interface ScheduleStall {
  /** The rank that cannot go on. */
  readonly rank: number;
  /** Position of the stuck action in the rank's list. */
  readonly index: number;
  /** The action the rank cannot start. */
  readonly action: Action;
  /** The action whose result it waits for (never run before this point). */
  readonly waitingFor: Action;
  /** The rank that holds `waitingFor`. */
  readonly waitingForRank: number;
}

/**
 * Thrown when a schedule cannot run to the end with blocking receives:
 * every rank that still has work waits for a result that no rank will
 * produce. `rank` and `action` name the first stalled rank; `stalls` lists
 * every stalled rank.
 *
 * @example
 * ```ts
 * import { ScheduleDeadlockError, validateSchedule } from "@conveyor/core/analysis";
 * const F = "F" as const, B = "B" as const;
 * try {
 *   validateSchedule({
 *     name: "custom", ranks: 2, microBatches: 1, stagesPerRank: 1, stageToRank: [0, 1],
 *     actions: [
 *       [{ kind: B, stage: 0, microBatch: 0 }, { kind: F, stage: 0, microBatch: 0 }],
 *       [{ kind: F, stage: 1, microBatch: 0 }, { kind: B, stage: 1, microBatch: 0 }],
 *     ],
 *   });
 * } catch (e) {
 *   if (e instanceof ScheduleDeadlockError) console.log(e.rank); // 0
 * }
 * ```
 */
export class ScheduleDeadlockError extends Error {
  /** First stalled rank. */
  readonly rank: number;
  /** The action where that rank stalls. */
  readonly action: Action;
  /** Every stalled rank with its action and what it waits for. */
  readonly stalls: readonly ScheduleStall[];

  /** Builds the error from the stalled ranks (at least one). */
  constructor(stalls: readonly ScheduleStall[]) {
    super(
      `schedule deadlocks with blocking receives: ` +
        stalls.map(describeStall).join("; "),
    );
    this.name = "ScheduleDeadlockError";
    this.rank = stalls[0].rank;
    this.action = stalls[0].action;
    this.stalls = stalls;
  }
}

function describeStall(s: ScheduleStall): string {
  const where = s.waitingForRank === s.rank
    ? "later on the same rank"
    : `on rank ${s.waitingForRank}`;
  return `rank ${s.rank} stalls at ${formatAction(s.action)} (position ${s.index}), ` +
    `waiting for ${formatAction(s.waitingFor)} ${where}`;
}

const UNIT = (n: number): StageCosts => {
  const one = new Float64Array(n).fill(1);
  return { F: one, B: one, I: one, W: one };
};

/** Dry run (any positive costs give the same verdict) → stalls. */
function findStalls(s: Schedule): ScheduleStall[] {
  const run = runSchedule(s, UNIT(s.stageToRank.length), 0, 1);
  return run.stalls.map((x: Stall) => ({
    rank: x.rank,
    index: x.index,
    action: x.action,
    waitingFor: x.waitingFor,
    waitingForRank: x.waitingForRank,
  }));
}

/**
 * Lists every rule a schedule breaks; empty when it is valid. Structure is
 * checked first (types, ranges, placement, one F and either one B or one I
 * and one W per stage and micro-batch); only a structurally sound schedule
 * is then dry-run, and each rank that stalls gives one `"deadlock"`
 * problem. An order problem inside one rank (a W before its I, a backward
 * before its own F) shows as a stall waiting for an action "later on the
 * same rank".
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core";
 * import { checkSchedule } from "@conveyor/core/analysis";
 * console.log(checkSchedule(generateSchedule("zb-h1", { ranks: 4, microBatches: 8 })).length); // 0
 * ```
 */
export function checkSchedule(schedule: Schedule): ScheduleProblem[] {
  const structure = checkStructure(schedule);
  if (structure.length > 0) return structure;
  return findStalls(schedule).map((x) => ({
    kind: "deadlock" as const,
    rank: x.rank,
    index: x.index,
    action: x.action,
    message: describeStall(x),
  }));
}

/**
 * Throws if a schedule is invalid: a `TypeError` for a malformed record or
 * action, a `RangeError` for out-of-range values, wrong placement, missing
 * or duplicate actions, and a {@linkcode ScheduleDeadlockError} (with the
 * stalled ranks and actions) when the order cannot run with blocking
 * receives and non-blocking sends. The message names up to three problems;
 * `checkSchedule` lists them all.
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core";
 * import { validateSchedule } from "@conveyor/core/analysis";
 * validateSchedule(generateSchedule("1f1b", { ranks: 4, microBatches: 8 })); // no throw
 * ```
 */
export function validateSchedule(schedule: Schedule): void {
  const structure = checkStructure(schedule);
  if (structure.length > 0) throw structureError(structure);
  const stalls = findStalls(schedule);
  if (stalls.length > 0) throw new ScheduleDeadlockError(stalls);
}
