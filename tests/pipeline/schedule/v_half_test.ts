import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { vHalfMemoryLimit } from "../../../src/pipeline/schedule/v_half.ts";
import { vMinMemoryLimit } from "../../../src/pipeline/schedule/v_min.ts";
import { half, vCappedTests } from "./_v_capped.ts";

vCappedTests("v-half", vHalfMemoryLimit, 5);

Deno.test("v-half and v-min: the papers' limits, about a half and a third of 1F1B's p", () => {
  assert.deepEqual([1, 2, 4, 8, 16].map(vHalfMemoryLimit), [1, 2, 3, 5, 9]);
  assert.deepEqual([1, 2, 4, 8, 16].map(vMinMemoryLimit), [1, 2, 2, 4, 6]);
});

Deno.test("v-half: with unequal costs its larger budget buys a shorter step than v-min's (p = 8, m = 32, F:I:W = 1 : 1.2 : 0.8)", () => {
  const costs = { F: 1, I: 1.2, W: 0.8 };
  const run = (name: string) =>
    simulate(generateSchedule(name, { ranks: 8, microBatches: 32, costs }), {
      costs: half(costs),
    });
  const h = run("v-half");
  const m = run("v-min");
  assert.ok(h.makespan < m.makespan, `v-half ${h.makespan} vs v-min ${m.makespan}`);
  assert.ok(Math.max(...m.peakActivations) < Math.max(...h.peakActivations));
});
