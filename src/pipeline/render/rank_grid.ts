/**
 * The grid of a data-parallel pipeline's D × P ranks: which replica and
 * which stages each rank holds.
 *
 * @module
 */

import type { Schedule } from "../schedule/schedule.ts";
import { describeValue } from "../../text/describe.ts";

/**
 * Text grid of `replicas` copies of `schedule`'s pipeline: one line per
 * replica, one column per pipeline rank, each cell `r<rank>: s<stages>`.
 * Ranks are numbered replica-major: rank `k · P + p` is pipeline rank `p`
 * of replica `k`, so replica k holds ranks `k·P … k·P + P − 1` and the D
 * replicas of a stage are P ranks apart. Lines joined by `\n`, no trailing
 * newline.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule } from "@conveyor/core";
 * import { rankGrid } from "./rank_grid.ts";
 * const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
 * assert.equal(
 *   rankGrid(s, 2),
 *   [
 *     "4 ranks: 2 replicas x 2 pipeline ranks (rank = replica * 2 + pipeline rank)",
 *     "           p0      p1",
 *     "replica 0  r0: s0  r1: s1",
 *     "replica 1  r2: s0  r3: s1",
 *   ].join("\n"),
 * );
 * ```
 */
export function rankGrid(schedule: Schedule, replicas: number): string {
  if (!Number.isInteger(replicas) || replicas < 1) {
    throw new RangeError(`replicas must be a positive integer, got ${describeValue(replicas)}`);
  }
  const p = schedule.ranks;
  const stages = Array.from(
    { length: p },
    (_, r) => schedule.stageToRank.flatMap((q, s) => q === r ? [s] : []).join(","),
  );
  const cells = Array.from(
    { length: replicas },
    (_, k) => stages.map((st, r) => `r${k * p + r}: s${st}`),
  );
  const heads = stages.map((_, r) => `p${r}`);
  const widths = heads.map((h, r) => Math.max(h.length, ...cells.map((row) => row[r].length)));
  const left = `replica ${replicas - 1}`.length + 2;
  const row = (label: string, items: string[]) =>
    (label.padEnd(left) + items.map((c, r) => c.padEnd(widths[r])).join("  ")).trimEnd();
  return [
    `${replicas * p} ranks: ${replicas} replica${
      replicas === 1 ? "" : "s"
    } x ${p} pipeline ranks ` +
    `(rank = replica * ${p} + pipeline rank)`,
    row("", heads),
    ...cells.map((c, k) => row(`replica ${k}`, c)),
  ].join("\n");
}
