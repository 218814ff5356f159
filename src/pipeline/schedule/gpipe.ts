/**
 * GPipe (Huang et al. 2019): every rank runs all forwards, then all
 * backwards. Peak activations m on every rank.
 *
 * @module
 */

import type { Action } from "./action.ts";
import type { Schedule } from "./schedule.ts";
import { act, loopPlacement, makeSchedule } from "./_common.ts";

/** GPipe over `ranks` ranks (one stage each) and `microBatches` micro-batches; arguments pre-checked. */
export function gpipe(ranks: number, microBatches: number): Schedule {
  const actions: Action[][] = [];
  for (let r = 0; r < ranks; r++) {
    const list: Action[] = [];
    for (let mb = 0; mb < microBatches; mb++) list.push(act("F", r, mb));
    for (let mb = 0; mb < microBatches; mb++) list.push(act("B", r, mb));
    actions.push(list);
  }
  return makeSchedule("gpipe", ranks, microBatches, 1, loopPlacement(ranks, 1), actions);
}
