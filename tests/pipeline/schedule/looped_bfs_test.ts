import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("looped-bfs: bubble 1 − v·m/((v−1)·max(m, p) + m + p − 1); p = 1…8, m = 1…32, v = 1…4", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      for (let v = 1; v <= 4; v++) {
        const s = generateSchedule("looped-bfs", { ranks: p, microBatches: m, stagesPerRank: v });
        validateSchedule(s);
        const r = simulate(s);
        // Each loop must wait for micro-batch 0 to come round when m < p.
        const span = (v - 1) * Math.max(m, p) + m + p - 1;
        assert.ok(
          Math.abs(r.bubbleFraction - (1 - (v * m) / span)) < 1e-12,
          `p=${p} m=${m} v=${v}`,
        );
        assert.equal(r.peakActivations[0], v * m);
      }
    }
  }
});

Deno.test("looped-bfs: all forwards stage by stage, then backwards in reverse, newest micro-batch first", () => {
  const s = generateSchedule("looped-bfs", { ranks: 2, microBatches: 2 });
  const text = s.actions.map((l) => l.map((a) => `${a.stage}${a.kind}${a.microBatch}`).join(" "));
  assert.deepEqual(text, [
    "0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0",
    "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0",
  ]);
});
