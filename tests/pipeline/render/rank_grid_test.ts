import assert from "node:assert/strict";
import { rankGrid } from "../../../src/pipeline/render/rank_grid.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";

Deno.test("rankGrid: replica-major ranks and each pipeline rank's stages (hand-computed)", () => {
  // Interleaved 1F1B at P = 2, V = 2: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3.
  const s = generateSchedule("interleaved-1f1b", { ranks: 2, microBatches: 4, stagesPerRank: 2 });
  assert.equal(
    rankGrid(s, 3),
    [
      "6 ranks: 3 replicas x 2 pipeline ranks (rank = replica * 2 + pipeline rank)",
      "           p0        p1",
      "replica 0  r0: s0,2  r1: s1,3",
      "replica 1  r2: s0,2  r3: s1,3",
      "replica 2  r4: s0,2  r5: s1,3",
    ].join("\n"),
  );
  const one = generateSchedule("gpipe", { ranks: 3, microBatches: 3 });
  assert.equal(
    rankGrid(one, 1),
    [
      "3 ranks: 1 replica x 3 pipeline ranks (rank = replica * 3 + pipeline rank)",
      "           p0      p1      p2",
      "replica 0  r0: s0  r1: s1  r2: s2",
    ].join("\n"),
  );
  // Wide rank numbers widen their column.
  const wide = rankGrid(generateSchedule("1f1b", { ranks: 2, microBatches: 2 }), 6).split("\n");
  assert.equal(wide[7], "replica 5  r10: s0  r11: s1");
  assert.throws(() => rankGrid(one, 0), /replicas must be a positive integer, got 0/);
});
