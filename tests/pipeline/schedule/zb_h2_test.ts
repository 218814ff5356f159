import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("zb-h2: steady-state bubble ≤ 1% once m ≥ 2p, one iteration no worse than ZB-H1, rank 0 holds 2p−1; p = 1…8, m = 1…32", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      const s = generateSchedule("zb-h2", { ranks: p, microBatches: m });
      validateSchedule(s);
      const one = simulate(s);
      const h1 = simulate(generateSchedule("zb-h1", { ranks: p, microBatches: m }));
      assert.ok(one.bubbleFraction <= h1.bubbleFraction + 1e-12, `p=${p} m=${m} single`);
      if (m >= 2 * p) {
        const many = simulate(s, { iterations: 4 });
        assert.ok(
          many.steadyStateBubble! <= 0.01,
          `p=${p} m=${m} steady ${many.steadyStateBubble}`,
        );
      }
      assert.equal(one.peakActivations[0], Math.min(2 * p - 1, m));
      assert.ok(Math.max(...one.peakActivations) <= 2 * p - 1);
    }
  }
});

Deno.test("zb-h2: each rank works without a gap from time r to 3m + r (a parallelogram)", () => {
  for (const [p, m] of [[3, 6], [4, 8], [5, 17]]) {
    const r = simulate(generateSchedule("zb-h2", { ranks: p, microBatches: m }));
    for (let rank = 0; rank < p; rank++) {
      const mine = r.events.filter((e) => e.rank === rank);
      assert.equal(mine[0].start, rank);
      assert.equal(mine[mine.length - 1].end, 3 * m + rank);
      for (let i = 1; i < mine.length; i++) assert.equal(mine[i].start, mine[i - 1].end);
    }
  }
});

Deno.test("zb-h2: rank r runs 2(p−1−r)+1 forwards before its first input-gradient pass", () => {
  const p = 5, m = 16;
  const s = generateSchedule("zb-h2", { ranks: p, microBatches: m });
  s.actions.forEach((list, r) => {
    const firstI = list.findIndex((a) => a.kind === "I");
    assert.equal(firstI, 2 * (p - 1 - r) + 1);
    assert.ok(list.slice(0, firstI).every((a) => a.kind === "F"));
  });
});
