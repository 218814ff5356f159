/**
 * The rules a schedule can break, as the validator reports them.
 *
 * @module
 */

import type { Action } from "../schedule/action.ts";

/** What kind of rule a schedule breaks. */
export type ScheduleProblemKind =
  | "type"
  | "range"
  | "placement"
  | "missing"
  | "duplicate"
  | "mixed-backward"
  | "deadlock";

/** One rule a schedule breaks, as `checkSchedule` reports it. */
export interface ScheduleProblem {
  /** The rule broken. */
  readonly kind: ScheduleProblemKind;
  /** A sentence naming the values. */
  readonly message: string;
  /** Rank concerned, when one is. */
  readonly rank?: number;
  /** Position in that rank's list, when one is. */
  readonly index?: number;
  /** The action concerned, when one is. */
  readonly action?: Action;
}
