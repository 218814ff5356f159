import assert from "node:assert/strict";
import { activationPeaks, rankMemory } from "../../src/advise/rank_memory.ts";
import type { Schedule } from "../../src/pipeline/schedule/schedule.ts";
import type { Action } from "../../src/pipeline/schedule/action.ts";
import type { StageMemory } from "../../src/pipeline/partition/stage_memory.ts";
import { generateSchedule } from "../../src/pipeline/schedule/generate.ts";

// "2F0" → { kind: "F", stage: 2, microBatch: 0 }
const act = (t: string): Action => {
  const m = /^(\d+)([FIWB])(\d+)$/.exec(t)!;
  return { kind: m[2] as Action["kind"], stage: Number(m[1]), microBatch: Number(m[3]) };
};
const sched = (stageToRank: number[], m: number, rows: string[]): Schedule => ({
  name: "hand",
  ranks: rows.length,
  microBatches: m,
  stagesPerRank: stageToRank.length / rows.length,
  stageToRank,
  actions: rows.map((r) => r.split(" ").map(act)),
});
const stage = (
  forwardPeak: number,
  afterForward: number,
  inputGradPeak: number,
  afterInputGrad: number,
  weightGradPeak: number,
  backwardPeak: number,
): StageMemory => ({
  forwardPeak,
  afterForward,
  inputGradPeak,
  afterInputGrad,
  weightGradPeak,
  backwardPeak,
});

Deno.test("activationPeaks: an I/W split walked by hand", () => {
  // held / peak after each action:
  // 0F0: peak 150, held 100; 0F1: 250, 200; 0I0: 260, 140; 0W0: 150, 100;
  // 0I1: 160, 40; 0W1: 50, 0.
  const s = sched([0], 2, ["0F0 0F1 0I0 0W0 0I1 0W1"]);
  assert.deepEqual(activationPeaks(s, [stage(150, 100, 60, 40, 10, 40)]), [260]);
  // W deferred to the end: both I's leave 40 each; the last W runs on 80 held.
  const late = sched([0], 2, ["0F0 0F1 0I0 0I1 0W0 0W1"]);
  assert.deepEqual(activationPeaks(late, [stage(150, 100, 60, 40, 500, 40)]), [
    Math.max(250, 200 + 60, 140 + 60, 80 + 500, 40 + 500),
  ]);
});

Deno.test("activationPeaks: each rank walks only its own stages, with their own figures", () => {
  // Two ranks, V = 2 in a V shape: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2.
  const s = sched([0, 1, 1, 0], 1, [
    "0F0 3F0 3B0 0B0",
    "1F0 2F0 2B0 1B0",
  ]);
  const c = [
    stage(10, 5, 0, 0, 0, 7),
    stage(20, 8, 0, 0, 0, 9),
    stage(30, 12, 0, 0, 0, 4),
    stage(40, 16, 0, 0, 0, 30),
  ];
  // rank 0: 0F0 → 10 (held 5); 3F0 → 5 + 40 = 45 (held 21); 3B0 → 21 + 30 = 51 (held 5); 0B0 → 12.
  // rank 1: 1F0 → 20 (8); 2F0 → 8 + 30 = 38 (20); 2B0 → 20 + 4 = 24 (8); 1B0 → 17.
  assert.deepEqual(activationPeaks(s, c), [51, 38]);
});

Deno.test("activationPeaks: GPipe holds m micro-batches, 1F1B p (the reference sheet's M_B counts)", () => {
  const c = stage(100, 100, 0, 0, 0, 0); // a stage keeps exactly what its forward peaks at
  for (const [p, m] of [[2, 4], [4, 8], [3, 12]]) {
    const g = generateSchedule("gpipe", { ranks: p, microBatches: m });
    assert.deepEqual(activationPeaks(g, new Array(p).fill(c)), new Array(p).fill(100 * m));
    const o = generateSchedule("1f1b", { ranks: p, microBatches: m });
    // Rank r holds p − r micro-batches at most (its warm-up forwards and one more).
    assert.deepEqual(
      activationPeaks(o, new Array(p).fill(c)),
      Array.from({ length: p }, (_, r) => 100 * (p - r)),
    );
  }
});

Deno.test("activationPeaks and rankMemory: malformed input is refused with the rule", () => {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  const c = stage(1, 1, 1, 1, 1, 1);
  assert.throws(() => activationPeaks(s, [c]), /one StageMemory per stage \(2\), got 1/);
  assert.throws(
    () => activationPeaks(s, [c, { ...c, afterForward: NaN }]),
    /stages\[1\]\.afterForward must be a finite number, got NaN/,
  );
  const layers = [{ paramBytes: 4 }, { paramBytes: 4 }];
  assert.throws(() => rankMemory(s, [0, 2], layers, [c, c]), /stages \+ 1 = 3 entries, got 2/);
  assert.throws(() => rankMemory(s, [0, 1, 3], layers, [c, c]), /from 0 to the layer count 2/);
  assert.throws(
    () => rankMemory(s, [0, 2, 2], layers, [c, c]),
    /from 0 to the layer count 2|strictly/,
  );
});

Deno.test("rankMemory: parameters, gradients, optimizer state and copies summed over each rank's stages", () => {
  // ZB-V places stages 0 and 3 on rank 0, 1 and 2 on rank 1.
  const s = generateSchedule("zb-v", { ranks: 2, microBatches: 4 });
  assert.deepEqual(s.stageToRank, [0, 1, 1, 0]);
  // 6 layers of Linear(16 → 16): 16·16 + 16 = 272 scalars, 1088 bytes; AdamW keeps
  // two moments (2176 bytes) and the step check copies parameters and moments (3264).
  const layer = { paramBytes: 1088, optimizerStateBytes: 2176, stepCopyBytes: 3264 };
  const layers = new Array(6).fill(layer);
  const zero = stage(0, 0, 0, 0, 0, 0);
  // Stages: [0, 1), [1, 3), [3, 5), [5, 6): rank 0 holds layers 0 and 5, rank 1 layers 1-4.
  const [r0, r1] = rankMemory(s, [0, 1, 3, 5, 6], layers, [zero, zero, zero, zero], {
    stepCheck: true,
  });
  assert.deepEqual(r0, {
    activations: 0,
    parameters: 2 * 1088,
    gradients: 2 * 1088,
    optimizerState: 2 * 2176,
    stepCopies: 2 * 3264,
    total: 2 * (1088 + 1088 + 2176 + 3264),
  });
  assert.equal(r1.parameters, 4 * 1088);
  assert.equal(r1.total, 4 * (1088 + 1088 + 2176 + 3264));
  // Without the step check there are no copies.
  const [q0] = rankMemory(s, [0, 1, 3, 5, 6], layers, [zero, zero, zero, zero]);
  assert.equal(q0.stepCopies, 0);
  assert.equal(q0.total, 2 * (1088 + 1088 + 2176));
});

Deno.test("rankMemory with shardOptimizer D: 1/D of the optimizer state and of the step-check copies per rank, plus the share's working copy and the whole stage's parameter copy", () => {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 4 });
  const layers = [100, 200, 300].map((b) => ({
    paramBytes: b,
    optimizerStateBytes: 2 * b,
    stepCopyBytes: 3 * b,
  }));
  const none = stage(0, 0, 0, 0, 0, 0);
  const whole = rankMemory(s, [0, 2, 3], layers, [none, none], { stepCheck: true });
  const half = rankMemory(s, [0, 2, 3], layers, [none, none], {
    stepCheck: true,
    shardOptimizer: 2,
  });
  // Rank 0 holds layers 0 and 1: 300 bytes of parameters.
  assert.equal(whole[0].optimizerState, 600);
  assert.equal(half[0].optimizerState, 300);
  assert.equal(half[0].parameters, 300 + 150);
  assert.equal(half[0].gradients, 300 + 150);
  assert.equal(half[0].stepCopies, 900 / 2 + 300);
  assert.equal(half[0].total, 450 + 450 + 300 + 750);
  assert.ok(half[0].total < whole[0].total);
  assert.throws(
    () => rankMemory(s, [0, 2, 3], layers, [none, none], { shardOptimizer: 0 }),
    /shardOptimizer must be the replicas D sharing the optimizer \(a positive integer\), got 0/,
  );
});
