// The tests every memory-capped V schedule (v-half, v-min) passes, against
// its paper's limit and the targets at p = 8, m = 32.
import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

// Costs per full stage (a rank's share of the model), as v-half and v-min
// read them; each stage of the V is half a full stage, so it runs at half.
export type Costs = { F: number; I: number; W: number };
export const half = (c: Costs): Costs => ({ F: c.F / 2, I: c.I / 2, W: c.W / 2 });
const UNIT: Costs = { F: 1, I: 1, W: 1 };

/**
 * Registers the shared tests of a memory-capped V schedule: `limit` its
 * default memory limit per p, `target` the most full stages' worth per rank
 * allowed at p = 8, m = 32 with unit costs.
 */
export function vCappedTests(name: string, limit: (ranks: number) => number, target: number): void {
  Deno.test(`${name}: at p = 8, m = 32 with unit costs, peak activations ≤ ${target} full stages' worth per rank (1F1B: 8) and a bubble no larger than 1F1B's`, () => {
    const s = generateSchedule(name, { ranks: 8, microBatches: 32 });
    validateSchedule(s);
    const r = simulate(s, { costs: half(UNIT) });
    const oneF = simulate(generateSchedule("1f1b", { ranks: 8, microBatches: 32 }));
    assert.equal(Math.max(...oneF.peakActivations), 8);
    // Stage-micro-batches of half stages: 2 make one full stage's worth.
    const peak = Math.max(...r.peakActivations) / 2;
    assert.ok(peak <= target, `${name} peak ${peak} full stages`);
    assert.ok(
      r.bubbleFraction <= oneF.bubbleFraction,
      `${name} bubble ${r.bubbleFraction} vs 1F1B ${oneF.bubbleFraction}`,
    );
    assert.equal(limit(8), target);
  });

  Deno.test(`${name}: V placement; every order valid and within its memory limit for p = 1…8, m ∈ {1, p, 2p, 4p}, unequal costs and comm`, () => {
    const costSets: Costs[] = [UNIT, { F: 1, I: 1.2, W: 0.8 }, { F: 1, I: 1.5, W: 0.5 }];
    for (let p = 1; p <= 8; p++) {
      for (const m of new Set([1, p, 2 * p, 4 * p])) {
        for (const costs of costSets) {
          for (const comm of [0, 0.3]) {
            const s = generateSchedule(name, { ranks: p, microBatches: m, costs, comm });
            validateSchedule(s);
            assert.equal(s.name, name);
            assert.equal(s.stagesPerRank, 2);
            s.actions.forEach((list, r) => {
              const stages = [...new Set(list.map((a) => a.stage))].sort((x, y) => x - y);
              assert.deepEqual(stages, [r, 2 * p - 1 - r]);
              assert.equal(list.length, 6 * m, "F, I, W of both stages for every micro-batch");
            });
            const r = simulate(s, { costs: half(costs), comm });
            const peak = Math.max(...r.peakActivations) / 2;
            const where = `p=${p} m=${m} ${JSON.stringify(costs)} comm ${comm}`;
            assert.ok(peak <= limit(p), `${where}: peak ${peak} > ${limit(p)}`);
          }
        }
      }
    }
  });

  Deno.test(`${name}: memoryLimit replaces the default; 1 (one micro-batch per stage pair) still builds`, () => {
    for (const p of [2, 4, 8]) {
      const tight = generateSchedule(name, { ranks: p, microBatches: 16, memoryLimit: 1 });
      validateSchedule(tight);
      assert.ok(Math.max(...simulate(tight).peakActivations) <= 2);
      // A larger budget than the default is allowed too, and is respected.
      const loose = generateSchedule(name, { ranks: p, microBatches: 16, memoryLimit: p });
      assert.ok(Math.max(...simulate(loose).peakActivations) / 2 <= p);
    }
  });

  Deno.test(`${name}: bad shapes and limits are refused with the value and the rule`, () => {
    assert.throws(
      () => generateSchedule(name, { ranks: 4, microBatches: 8, stagesPerRank: 1 }),
      new RegExp(`${name} places exactly 2 stages per rank, got stagesPerRank 1`),
    );
    assert.throws(
      () => generateSchedule(name, { ranks: 4, microBatches: 8, memoryLimit: 0.5 }),
      /memoryLimit must be a finite number >= 1, got 0.5/,
    );
  });
}
