import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("1f1b: bubble exactly (p−1)/(m+p−1), rank 0 holds min(p, m) activations, p = 1…8, m = 1…32", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      const s = generateSchedule("1f1b", { ranks: p, microBatches: m });
      validateSchedule(s);
      const r = simulate(s);
      assert.ok(Math.abs(r.bubbleFraction - (p - 1) / (m + p - 1)) < 1e-12, `p=${p} m=${m}`);
      assert.equal(r.peakActivations[0], Math.min(p, m));
      // Rank r keeps at most p − r micro-batches alive.
      r.peakActivations.forEach((peak, rank) => assert.ok(peak <= Math.min(p - rank, m)));
    }
  }
});

Deno.test("1f1b: unequal F and B keep the bubble (p−1)(F+B) per rank", () => {
  for (const [F, B] of [[1, 3], [2, 1], [0.5, 1.7]]) {
    for (const [p, m] of [[2, 5], [4, 8], [7, 3]]) {
      const r = simulate(generateSchedule("1f1b", { ranks: p, microBatches: m }), {
        costs: { F, B },
      });
      const idle = (p - 1) * (F + B);
      assert.ok(Math.abs(r.bubbleFraction - idle / (idle + m * (F + B))) < 1e-12);
    }
  }
});

Deno.test("1f1b: warm-up of p−1−r forwards, then one forward and one backward in turn", () => {
  const s = generateSchedule("1f1b", { ranks: 4, microBatches: 6 });
  const kinds = s.actions.map((l) => l.map((a) => a.kind).join(""));
  assert.deepEqual(kinds, [
    "FFF" + "FB".repeat(3) + "BBB",
    "FF" + "FB".repeat(4) + "BB",
    "F" + "FB".repeat(5) + "B",
    "FB".repeat(6),
  ]);
});
