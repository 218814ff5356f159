/**
 * Deno.bench groups over the schedules: generating a schedule and simulating
 * two back-to-back iterations (single and steady-state bubble), one group per
 * schedule ("simulator speed: NAME"), one bench per (p, m) of the grid. These
 * measure the simulator's own speed; the bubble fractions and peak memory
 * they produce are printed by `deno run -A bench/bubble_table.ts`.
 *
 * ```sh
 * deno bench -A bench/bubble_bench.ts
 * ```
 *
 * @module
 */

import { generateSchedule, SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";

const GRID: readonly [number, number][] = [[4, 8], [4, 32], [8, 16], [8, 64]];

/** False for a (p, m) the schedule's own rules refuse (e.g. dualpipe-v needs m >= 2p). */
function canGenerate(name: string, p: number, m: number): boolean {
  try {
    generateSchedule(name, { ranks: p, microBatches: m });
    return true;
  } catch (err) {
    if (err instanceof RangeError) return false;
    throw err;
  }
}

for (const name of SCHEDULE_NAMES) {
  let first = true;
  for (const [p, m] of GRID) {
    if (!canGenerate(name, p, m)) continue;
    Deno.bench({
      name: `${name} p=${p} m=${m}`,
      group: `simulator speed: ${name}`,
      baseline: first,
      fn() {
        simulate(generateSchedule(name, { ranks: p, microBatches: m }), { iterations: 2 });
      },
    });
    first = false;
  }
}
