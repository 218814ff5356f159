import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("interleaved-1f1b: bubble exactly (p−1)/(v·m+p−1) when m is a multiple of p; p = 1…8, m = 1…32, v = 2…4", () => {
  let exact = 0;
  for (let p = 1; p <= 8; p++) {
    for (let m = p; m <= 32; m += p) {
      for (let v = 2; v <= 4; v++) {
        const s = generateSchedule("interleaved-1f1b", {
          ranks: p,
          microBatches: m,
          stagesPerRank: v,
        });
        validateSchedule(s);
        const r = simulate(s);
        assert.ok(
          Math.abs(r.bubbleFraction - (p - 1) / (v * m + p - 1)) < 1e-12,
          `p=${p} m=${m} v=${v}`,
        );
        exact++;
      }
    }
  }
  assert.ok(exact > 200);
});

Deno.test("interleaved-1f1b: m not a multiple of p runs in PyTorch's rounds, never worse than 1F1B, better once m > p", () => {
  let tried = 0;
  for (let p = 2; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      const rounds = Math.max(1, Math.floor(m / p));
      if (m % p === 0 || m % rounds !== 0) continue;
      const s = generateSchedule("interleaved-1f1b", { ranks: p, microBatches: m });
      validateSchedule(s);
      const r = simulate(s);
      const oneF = simulate(generateSchedule("1f1b", { ranks: p, microBatches: m }));
      assert.ok(r.bubbleFraction <= oneF.bubbleFraction + 1e-12, `p=${p} m=${m}`);
      if (m > p) assert.ok(r.bubbleFraction < oneF.bubbleFraction, `p=${p} m=${m} strictly`);
      tried++;
    }
  }
  assert.ok(tried > 50);
});

Deno.test("interleaved-1f1b: loop placement, the c-th stage of rank r is global stage c·p + r", () => {
  const s = generateSchedule("interleaved-1f1b", { ranks: 3, microBatches: 6, stagesPerRank: 3 });
  assert.deepEqual(s.stageToRank, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
  s.actions.forEach((list, r) => {
    assert.deepEqual([...new Set(list.map((a) => a.stage))].sort((x, y) => x - y), [
      r,
      r + 3,
      r + 6,
    ]);
  });
});

Deno.test("interleaved-1f1b: rank 0 holds about p(1 + (p−1)/(v·p)) full-stage micro-batches", () => {
  // Megatron's warm-up on rank 0: (v−1)·p + 2(p−1) stage forwards, plus one.
  for (const [p, v] of [[2, 2], [4, 2], [4, 4], [8, 2]]) {
    const m = 4 * p;
    const r = simulate(
      generateSchedule("interleaved-1f1b", { ranks: p, microBatches: m, stagesPerRank: v }),
    );
    assert.equal(r.peakActivations[0], (v - 1) * p + 2 * (p - 1) + 1);
  }
});
