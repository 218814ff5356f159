import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("dualpipe-v: valid for m ≥ 2p, one iteration no worse than ZB-H1, at most p+1 full-stage units; p = 1…8", () => {
  for (let p = 1; p <= 8; p++) {
    for (let m = 2 * p; m <= 32; m++) {
      const s = generateSchedule("dualpipe-v", { ranks: p, microBatches: m });
      validateSchedule(s);
      assert.deepEqual(
        s.stageToRank,
        Array.from({ length: 2 * p }, (_, i) => (i < p ? i : 2 * p - 1 - i)),
      );
      const r = simulate(s);
      const h1 = simulate(generateSchedule("zb-h1", { ranks: p, microBatches: m }));
      assert.ok(r.bubbleFraction <= h1.bubbleFraction + 1e-12, `p=${p} m=${m}`);
      assert.ok(Math.max(...r.peakActivations) <= 2 * (p + 1), `p=${p} m=${m} memory`);
    }
  }
});

Deno.test("dualpipe-v: mixes full backwards with I/W splits and needs m ≥ 2p", () => {
  const s = generateSchedule("dualpipe-v", { ranks: 4, microBatches: 10 });
  const kinds = new Set(s.actions.flat().map((a) => a.kind));
  assert.deepEqual([...kinds].sort(), ["B", "F", "I", "W"]);
  assert.throws(
    () => generateSchedule("dualpipe-v", { ranks: 4, microBatches: 7 }),
    /dualpipe-v needs microBatches >= 2 × ranks \(8\), got microBatches 7 with ranks 4/,
  );
});
