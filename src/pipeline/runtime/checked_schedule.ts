/**
 * A schedule checked once: {@linkcode checkSchedule} runs the full check
 * (`validateSchedule`: structure and a dry run that finds deadlocks) and
 * returns a frozen copy that every later hop (the model's plan, its rank
 * group, a subprocess group's host) passes on without checking it again.
 * The copy is frozen, so it cannot change after its check.
 *
 * @module
 */

import type { Schedule } from "../schedule/schedule.ts";
import { validateSchedule } from "../analysis/validate.ts";

// Frozen copies already checked (by identity: a copy never changes).
const checked = new WeakSet<Schedule>();
let dryRuns = 0;

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === "object" && !Object.isFrozen(v)) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/**
 * Checks `schedule` with `validateSchedule` (throwing its error) and
 * returns a frozen copy; given such a copy, returns it at once.
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core/runtime";
 * import { checkSchedule } from "./checked_schedule.ts";
 * const s = checkSchedule(generateSchedule("1f1b", { ranks: 2, microBatches: 2 }));
 * console.log(Object.isFrozen(s.actions[0]), checkSchedule(s) === s); // true true
 * ```
 */
export function checkSchedule(schedule: Schedule): Schedule {
  if (checked.has(schedule)) return schedule;
  validateSchedule(schedule);
  dryRuns++;
  return markScheduleChecked(structuredClone(schedule));
}

/**
 * Freezes `schedule` and takes it as checked without a check: only for a
 * schedule that {@linkcode checkSchedule} passed in the process that sent
 * it (a subprocess group's host receives its parent's).
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core/runtime";
 * import { checkSchedule, markScheduleChecked } from "./checked_schedule.ts";
 * const sent = JSON.parse(JSON.stringify(generateSchedule("1f1b", { ranks: 2, microBatches: 2 })));
 * const s = markScheduleChecked(sent);
 * console.log(checkSchedule(s) === s); // true
 * ```
 */
export function markScheduleChecked(schedule: Schedule): Schedule {
  checked.add(deepFreeze(schedule));
  return schedule;
}

/**
 * How many full checks {@linkcode checkSchedule} has run in this process
 * (for tests: a model's creation runs one).
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core/runtime";
 * import { checkSchedule, scheduleChecks } from "./checked_schedule.ts";
 * const before = scheduleChecks();
 * checkSchedule(generateSchedule("gpipe", { ranks: 2, microBatches: 2 }));
 * console.log(scheduleChecks() - before); // 1
 * ```
 */
export function scheduleChecks(): number {
  return dryRuns;
}
