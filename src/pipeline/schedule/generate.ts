/**
 * The package's schedule table, and the names, checks and generator built
 * from it. A new schedule is a file exporting its
 * `ScheduleDefinition` and one line in {@linkcode SCHEDULES}.
 *
 * @module
 */

import type { Schedule } from "./schedule.ts";
import {
  createScheduleRegistry,
  type GenerateOptions,
  type ScheduleRegistry,
} from "./schedule_registry.ts";
import { GPIPE } from "./gpipe.ts";
import { ONE_F_ONE_B } from "./one_f_one_b.ts";
import { INTERLEAVED_ONE_F_ONE_B } from "./interleaved_one_f_one_b.ts";
import { LOOPED_BFS } from "./looped_bfs.ts";
import { ZB_H1 } from "./zb_h1.ts";
import { ZB_H2 } from "./zb_h2.ts";
import { ZB_V } from "./zb_v.ts";
import { ZB_AUTO } from "./zb_auto.ts";
import { DUALPIPE_V } from "./dualpipe_v.ts";
import { V_HALF } from "./v_half.ts";
import { V_MIN } from "./v_min.ts";

export type { GenerateOptions } from "./schedule_registry.ts";

/**
 * The package's schedule table: one `ScheduleDefinition` per
 * schedule, one line each, in the order help texts list them.
 *
 * @example
 * ```ts
 * import { SCHEDULES } from "./generate.ts";
 * console.log(SCHEDULES.length, SCHEDULES[0].name); // 11 gpipe
 * ```
 */
export const SCHEDULES = [
  GPIPE,
  ONE_F_ONE_B,
  INTERLEAVED_ONE_F_ONE_B,
  LOOPED_BFS,
  ZB_H1,
  ZB_H2,
  ZB_V,
  ZB_AUTO,
  DUALPIPE_V,
  V_HALF,
  V_MIN,
] as const;

/**
 * One of {@linkcode SCHEDULE_NAMES}: the names in the table.
 *
 * @example
 * ```ts
 * import type { ScheduleName } from "@conveyor/core";
 * const name: ScheduleName = "zb-h1";
 * console.log(name); // zb-h1
 * ```
 */
export type ScheduleName = typeof SCHEDULES[number]["name"];

/**
 * The registry over {@linkcode SCHEDULES}: what {@linkcode generateSchedule},
 * the bubble estimates and the CLI use.
 *
 * @example
 * ```ts
 * import { SCHEDULE_REGISTRY } from "./generate.ts";
 * console.log(SCHEDULE_REGISTRY.definition("zb-v").defaultStagesPerRank); // 2
 * ```
 */
export const SCHEDULE_REGISTRY: ScheduleRegistry<ScheduleName> = createScheduleRegistry<
  ScheduleName
>(SCHEDULES);

/**
 * Schedule names as the CLI spells them, in the table's order.
 *
 * @example
 * ```ts
 * import { SCHEDULE_NAMES } from "@conveyor/core";
 * console.log(SCHEDULE_NAMES.includes("zb-h1")); // true
 * ```
 */
export const SCHEDULE_NAMES: readonly ScheduleName[] = SCHEDULE_REGISTRY.names;

/**
 * Checks a schedule name (TypeError listing the valid names); for the
 * modules that take names beside {@linkcode generateSchedule}.
 *
 * @example
 * ```ts
 * import { checkScheduleName } from "./generate.ts";
 * console.log(checkScheduleName("1f1b")); // 1f1b
 * ```
 */
export function checkScheduleName(name: unknown): ScheduleName {
  return SCHEDULE_REGISTRY.definition(name).name;
}

/**
 * Checks ranks, microBatches and stagesPerRank against the named schedule's
 * rules (RangeError naming the value) and returns its stages per rank V.
 *
 * @example
 * ```ts
 * import { checkScheduleShape } from "./generate.ts";
 * console.log(checkScheduleShape("interleaved-1f1b", 2, 4, undefined)); // 2
 * ```
 */
export function checkScheduleShape(
  name: ScheduleName,
  ranks: unknown,
  microBatches: unknown,
  stagesPerRank: unknown,
): number {
  return SCHEDULE_REGISTRY.checkShape(name, ranks, microBatches, stagesPerRank);
}

/**
 * Builds a schedule by name. Checks run before any work, in this order: the
 * name (TypeError listing the valid names), ranks, microBatches,
 * stagesPerRank, the schedule's own rules, then costs, comm and memoryLimit
 * (RangeError naming the value and the rule).
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core";
 * const s = generateSchedule("interleaved-1f1b", { ranks: 2, microBatches: 4 });
 * console.log(s.stagesPerRank, s.stageToRank); // 2 [ 0, 1, 0, 1 ]
 * ```
 */
export function generateSchedule(name: ScheduleName | string, options: GenerateOptions): Schedule {
  return SCHEDULE_REGISTRY.generate(name, options);
}
