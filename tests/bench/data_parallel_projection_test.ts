import assert from "node:assert/strict";
import { generateSchedule } from "../../src/pipeline/schedule/generate.ts";
import { simulate, type SimulationResult } from "../../src/pipeline/analysis/simulate.ts";
import type { Schedule } from "../../src/pipeline/schedule/schedule.ts";
import { projectReplicas, stepWithOptimizer } from "../../bench/_data_parallel_projection.ts";
import { measureWorkerLink } from "../../bench/_worker_link.ts";

const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });

Deno.test("stepWithOptimizer: each stage steps after its last backward, or after its all-reduce", () => {
  // Default costs: stage 1's last B ends at 7, stage 0's at 9 (makespan 9).
  const plain = simulate(s);
  assert.equal(stepWithOptimizer(s, plain, [0, 0]), 9);
  assert.equal(stepWithOptimizer(s, plain, [1, 3]), 10); // max(9 + 1, 7 + 3)
  assert.equal(stepWithOptimizer(s, plain, [0.5, 1]), 9.5);
  // D = 2: stage 1's all-reduce 7..12, stage 0's 9..11.
  const dp = simulate(s, {
    dataParallel: 2,
    link: { latencyMs: 0.5, bytesPerMs: 100 },
    gradientBytes: [100, 400],
  });
  assert.equal(stepWithOptimizer(s, dp, [0, 0]), 12);
  assert.equal(stepWithOptimizer(s, dp, [2, 1]), 13); // max(11 + 2, 12 + 1)
  assert.throws(() => stepWithOptimizer(s, plain, [1]), /1 entries, want 2/);
  assert.throws(() => stepWithOptimizer(s, plain, [1, -1]), /optimizerMs\[1\].*got -1/);
});

Deno.test("stepWithOptimizer: a rank's optimizer steps run one at a time, in the order their stages are ready", () => {
  const one = { ranks: 1, stageToRank: [0, 0] } as unknown as Schedule;
  const sim = {
    makespan: 10,
    events: [
      { rank: 0, iteration: 0, start: 0, end: 8, action: { kind: "B", stage: 0, microBatch: 0 } },
      { rank: 0, iteration: 0, start: 8, end: 10, action: { kind: "B", stage: 1, microBatch: 0 } },
    ],
  } as unknown as SimulationResult;
  assert.equal(stepWithOptimizer(one, sim, [5, 1]), 14); // 8 + 5, then 13 + 1
  assert.equal(stepWithOptimizer(one, sim, [1, 1]), 11); // 8 + 1, then 10 + 1
});

Deno.test("projectReplicas: one stage adds the ring all-reduce 2(D−1)/D·bytes/β + 2(D−1)·α to the step; speed-up D·step(1)/step(D)", () => {
  const p1 = generateSchedule("1f1b", { ranks: 1, microBatches: 4 });
  const costs = { F: 10, B: 20 }; // a step of 4 · 30 = 120
  const link = { latencyMs: 0.5, bytesPerMs: 1000 };
  const rows = projectReplicas(p1, costs, [8000], link, [3], [1, 2, 4, 16]);
  assert.deepEqual(rows.map((r) => r.dataParallel), [1, 2, 4, 16]);
  for (const r of rows) {
    const d = r.dataParallel;
    const ring = d === 1 ? 0 : (2 * (d - 1) / d) * 8000 / 1000 + 2 * (d - 1) * 0.5;
    assert.ok(Math.abs(r.allReduceMs - ring) < 1e-9, `D = ${d}: ${r.allReduceMs} vs ${ring}`);
    assert.ok(Math.abs(r.stepMs - (120 + ring + 3)) < 1e-9, `D = ${d}: ${r.stepMs}`);
    assert.ok(Math.abs(r.speedup - (d * 123) / (123 + ring)) < 1e-12);
  }
  assert.equal(rows[0].speedup, 1);
  // A free link: the throughput grows as D.
  const free = projectReplicas(p1, costs, [8000], { latencyMs: 0, bytesPerMs: Infinity }, [0], [
    1,
    8,
  ]);
  assert.deepEqual(free.map((r) => r.speedup), [1, 8]);
  // A step overhead adds to every step: D · 125 / (125 + ring).
  const over = projectReplicas(p1, costs, [8000], link, [3], [1, 4], 2);
  const ring4 = (2 * 3 / 4) * 8 + 2 * 3 * 0.5;
  assert.ok(Math.abs(over[1].stepMs - (125 + ring4)) < 1e-9, `${over[1].stepMs}`);
  assert.ok(Math.abs(over[1].speedup - (4 * 125) / (125 + ring4)) < 1e-12);
  assert.throws(
    () => projectReplicas(p1, costs, [8000], link, [3], [1], -1),
    /stepOverheadMs must be a finite number >= 0, got -1/,
  );
});

Deno.test("measureWorkerLink: two workers agree on a measured link (finite latency, positive bandwidth); bad sizes are refused", async () => {
  const link = await measureWorkerLink({ sizes: [4, 64 << 10], rounds: 2 });
  assert.ok(Number.isFinite(link.latencyMs) && link.latencyMs >= 0, `${link.latencyMs}`);
  assert.ok(link.bytesPerMs > 0, `${link.bytesPerMs}`);
  await assert.rejects(
    () => measureWorkerLink({ sizes: [4, 6], rounds: 1 }),
    /link worker \d: .*multiple of 4 bytes, got 6/,
  );
});
