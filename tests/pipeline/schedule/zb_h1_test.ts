import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("zb-h1: bubble exactly (p−1)/(3m+p−1) when m ≥ p; rank 0 holds min(p, m) as in 1F1B; p = 1…8, m = 1…32", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      const s = generateSchedule("zb-h1", { ranks: p, microBatches: m });
      validateSchedule(s);
      const r = simulate(s);
      if (m >= p) {
        assert.ok(Math.abs(r.bubbleFraction - (p - 1) / (3 * m + p - 1)) < 1e-12, `p=${p} m=${m}`);
      }
      const oneF = simulate(generateSchedule("1f1b", { ranks: p, microBatches: m }));
      assert.ok(r.bubbleFraction <= oneF.bubbleFraction + 1e-12, `never worse than 1F1B`);
      assert.equal(r.peakActivations[0], Math.min(p, m));
      // Postponed W passes keep rank r's inputs longer, but never beyond rank 0's peak.
      r.peakActivations.forEach((peak) => assert.ok(peak <= Math.min(p, m)));
    }
  }
});

Deno.test("zb-h1: rank r lets its W passes trail its I passes by r micro-batches", () => {
  const p = 4, m = 8;
  const s = generateSchedule("zb-h1", { ranks: p, microBatches: m });
  s.actions.forEach((list, r) => {
    let inputs = 0;
    for (const a of list) {
      if (a.kind === "I") inputs++;
      if (a.kind === "W" && inputs < m) assert.equal(a.microBatch, inputs - 1 - r);
    }
    // The postponed ones run at the end.
    const tail = list.slice(list.length - r).map((a) => `${a.kind}${a.microBatch}`);
    assert.deepEqual(tail, Array.from({ length: r }, (_, i) => `W${m - r + i}`));
  });
});
