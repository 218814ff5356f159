import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("zb-v: V placement, rank r holds stages r and 2p−1−r", () => {
  const s = generateSchedule("zb-v", { ranks: 4, microBatches: 8 });
  assert.equal(s.stagesPerRank, 2);
  assert.deepEqual(s.stageToRank, [0, 1, 2, 3, 3, 2, 1, 0]);
  s.actions.forEach((list, r) => {
    assert.deepEqual([...new Set(list.map((a) => a.stage))].sort((x, y) => x - y), [r, 7 - r]);
  });
});

Deno.test("zb-v: steady-state bubble ≤ 1% once m ≥ 2p, one iteration no worse than ZB-H1, memory within 1F1B's; p = 1…8, m = 1…32", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      const s = generateSchedule("zb-v", { ranks: p, microBatches: m });
      validateSchedule(s);
      const one = simulate(s);
      const h1 = simulate(generateSchedule("zb-h1", { ranks: p, microBatches: m }));
      assert.ok(one.bubbleFraction <= h1.bubbleFraction + 1e-12, `p=${p} m=${m} single`);
      // No order can beat the ramp-up: rank r waits for r half-stage forwards.
      assert.ok(one.bubbleFraction >= (p - 1) / (6 * m + p - 1) - 1e-12);
      if (m >= 2 * p) {
        const many = simulate(s, { iterations: 4 });
        assert.ok(
          many.steadyStateBubble! <= 0.01,
          `p=${p} m=${m} steady ${many.steadyStateBubble}`,
        );
      }
      // Stages are half of a full stage: 2 stage-micro-batches make one full-stage unit.
      const oneF = simulate(generateSchedule("1f1b", { ranks: p, microBatches: m }));
      assert.ok(one.peakActivations[0] / 2 <= oneF.peakActivations[0], `p=${p} m=${m} memory`);
    }
  }
});

Deno.test("zb-v: with m ≥ 2p−1 one iteration reaches the ramp-up bound (p−1)/(6m+p−1) exactly", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 2 * p - 1; m <= 32; m++) {
      const r = simulate(generateSchedule("zb-v", { ranks: p, microBatches: m }));
      assert.ok(Math.abs(r.bubbleFraction - (p - 1) / (6 * m + p - 1)) < 1e-12, `p=${p} m=${m}`);
    }
  }
});
