import assert from "node:assert/strict";
import { estimateBubbleFraction } from "../../../src/pipeline/analysis/bubble_estimate.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";

Deno.test("estimateBubbleFraction: equals the simulated bubble where the sheet's formula is exact", () => {
  const equal = { F: 1, I: 1, W: 1 };
  for (let p = 1; p <= 8; p++) {
    for (let m = 1; m <= 32; m++) {
      const sim = (name: string, V?: number) =>
        simulate(generateSchedule(name, { ranks: p, microBatches: m, stagesPerRank: V }))
          .bubbleFraction;
      const near = (x: number, y: number, what: string) =>
        assert.ok(Math.abs(x - y) < 1e-12, `${what} p=${p} m=${m}: ${x} vs ${y}`);
      near(estimateBubbleFraction("gpipe", p, m, equal), (p - 1) / (m + p - 1), "gpipe formula");
      near(estimateBubbleFraction("gpipe", p, m), sim("gpipe"), "gpipe");
      near(estimateBubbleFraction("1f1b", p, m), sim("1f1b"), "1f1b");
      if (m >= p) near(estimateBubbleFraction("zb-h1", p, m), sim("zb-h1"), "zb-h1");
      for (const V of [1, 2, 3]) {
        near(estimateBubbleFraction("looped-bfs", p, m, {}, V), sim("looped-bfs", V), "bfs");
      }
      if (m % p === 0) {
        for (const V of [2, 3]) {
          near(
            estimateBubbleFraction("interleaved-1f1b", p, m, {}, V),
            sim("interleaved-1f1b", V),
            "interleaved",
          );
        }
      }
      if (m >= 2 * p) {
        for (const name of ["zb-h2", "zb-v"]) {
          const steady = simulate(generateSchedule(name, { ranks: p, microBatches: m }), {
            iterations: 4,
          });
          near(estimateBubbleFraction(name, p, m), steady.steadyStateBubble!, name);
        }
      }
    }
  }
});

Deno.test("estimateBubbleFraction: unequal costs follow the sheet's idle-time column", () => {
  const c = { F: 1, I: 1.5, W: 0.5 };
  const p = 4, m = 8;
  const busy = m * 3;
  assert.ok(Math.abs(estimateBubbleFraction("1f1b", p, m, c) - 9 / (9 + busy)) < 1e-12);
  assert.ok(Math.abs(estimateBubbleFraction("zb-h1", p, m, c) - 6 / (6 + busy)) < 1e-12);
  assert.ok(Math.abs(estimateBubbleFraction("zb-h2", p, m, c) - 4.5 / (4.5 + busy)) < 1e-12);
  // Per-stage arrays: the slowest stage of each kind counts.
  assert.equal(
    estimateBubbleFraction("1f1b", 2, 4, { F: [1, 2], B: [2, 4] }),
    estimateBubbleFraction("1f1b", 2, 4, { F: 2, B: 4 }),
  );
  assert.ok(Number.isNaN(estimateBubbleFraction("zb-auto", 4, 8)));
  assert.ok(Number.isNaN(estimateBubbleFraction("dualpipe-v", 4, 8)));
});

Deno.test("estimateBubbleFraction: checks its arguments as generateSchedule does", () => {
  assert.throws(() => estimateBubbleFraction("zb-h3", 4, 8), TypeError);
  assert.throws(
    () => estimateBubbleFraction("1f1b", 0, 8),
    /ranks must be a positive integer, got 0/,
  );
  assert.throws(
    () => estimateBubbleFraction("1f1b", 4, 0),
    /microBatches must be a positive integer, got 0/,
  );
  assert.throws(
    () => estimateBubbleFraction("interleaved-1f1b", 4, 8, {}, 1),
    /stagesPerRank >= 2/,
  );
  assert.throws(() => estimateBubbleFraction("1f1b", 4, 8, { F: -1 }), /costs\.F/);
});
