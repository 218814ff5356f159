import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("gpipe: bubble exactly (p−1)/(m+p−1) and m activations on every rank, p = 1…8, m = 1…32", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      const s = generateSchedule("gpipe", { ranks: p, microBatches: m });
      validateSchedule(s);
      const r = simulate(s);
      assert.ok(Math.abs(r.bubbleFraction - (p - 1) / (m + p - 1)) < 1e-12, `p=${p} m=${m}`);
      assert.equal(r.makespan, 3 * (m + p - 1));
      assert.deepEqual(r.peakActivations, new Array(p).fill(m));
    }
  }
});

Deno.test("gpipe: every forward of a rank comes before its first backward", () => {
  const s = generateSchedule("gpipe", { ranks: 3, microBatches: 4 });
  for (const list of s.actions) {
    assert.deepEqual(list.map((a) => a.kind).join(""), "FFFFBBBB");
  }
});
