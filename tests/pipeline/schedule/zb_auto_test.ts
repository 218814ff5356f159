import assert from "node:assert/strict";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { type ActionCosts, simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { validateSchedule } from "../../../src/pipeline/analysis/validate.ts";

// Every schedule but the one under test (generate_test.ts pins the list).
const HAND_MADE = SCHEDULE_NAMES.filter((n) => n !== "zb-auto");

/** `costs` per full stage, as a schedule with V stages per rank runs them: 1/V each. */
function perStage(costs: { F: number; I: number; W: number }, V: number): ActionCosts {
  return { F: costs.F / V, I: costs.I / V, W: costs.W / V };
}

/**
 * Best single-iteration makespan of the hand-made schedules (default V) that
 * fit `limit` full-stage micro-batches, their stages costing 1/V of a full stage.
 */
function bestHandMade(
  p: number,
  m: number,
  costs: { F: number; I: number; W: number },
  comm: number,
  limit: number,
) {
  let best = Infinity;
  let name = "";
  for (const n of HAND_MADE) {
    let s;
    try {
      s = generateSchedule(n, { ranks: p, microBatches: m });
    } catch (e) {
      // Only a documented constraint (interleaved rounds, dualpipe-v's m ≥ 2p).
      assert.ok(e instanceof RangeError);
      continue;
    }
    const V = s.stagesPerRank;
    const r = simulate(s, { costs: perStage(costs, V), comm });
    if (Math.max(...r.peakActivations) / V > limit) continue;
    if (r.makespan < best) [best, name] = [r.makespan, n];
  }
  return { best, name };
}

Deno.test("zb-auto: under F:I:W = 1 : 1.2 : 0.8, comm 0 / 0.3 / 1, no worse than every hand-made schedule within the same memory (full-stage units), p = 2…8, m = p…4p", () => {
  const costs = { F: 1, I: 1.2, W: 0.8 };
  let strictlyBetter = 0;
  let cases = 0;
  const placements = new Set<number>();
  for (const comm of [0, 0.3, 1]) {
    for (let p = 2; p <= 8; p++) {
      for (const m of new Set([p, p + 1, 2 * p - 1, 2 * p, 3 * p, 4 * p])) {
        for (const limit of [p, 2 * p - 1]) {
          const s = generateSchedule("zb-auto", {
            ranks: p,
            microBatches: m,
            costs,
            comm,
            memoryLimit: limit,
          });
          validateSchedule(s);
          const V = s.stagesPerRank;
          placements.add(V);
          const r = simulate(s, { costs: perStage(costs, V), comm });
          const at = `p=${p} m=${m} comm=${comm} limit=${limit}`;
          assert.ok(Math.max(...r.peakActivations) / V <= limit, `${at} memory`);
          const hand = bestHandMade(p, m, costs, comm, limit);
          // Same total work, so makespan order is bubble order.
          assert.ok(
            r.makespan <= hand.best + 1e-9,
            `${at}: zb-auto (V=${V}) ${r.makespan} > ${hand.name} ${hand.best}`,
          );
          if (r.makespan < hand.best - 1e-9) strictlyBetter++;
          cases++;
        }
      }
    }
  }
  // Both placements win somewhere, and the greedy beats every hand-made order in many cases.
  assert.deepEqual([...placements].sort(), [1, 2]);
  assert.ok(strictlyBetter >= 60, `${strictlyBetter} of ${cases} strictly better`);
});

Deno.test("zb-auto: the review's cases now reach ZB-V's bubble or better (p=4 m=8, p=8 m=16 at comm 0; p=4 m=16 at comm 0.3)", () => {
  const costs = { F: 1, I: 1.2, W: 0.8 };
  for (const [p, m, comm] of [[4, 8, 0], [8, 16, 0], [4, 16, 0.3]]) {
    const s = generateSchedule("zb-auto", { ranks: p, microBatches: m, costs, comm });
    const auto = simulate(s, { costs: perStage(costs, s.stagesPerRank), comm });
    const v = simulate(generateSchedule("zb-v", { ranks: p, microBatches: m }), {
      costs: perStage(costs, 2),
      comm,
    });
    assert.ok(auto.bubbleFraction <= v.bubbleFraction + 1e-12, `p=${p} m=${m} comm=${comm}`);
  }
});

Deno.test("zb-auto: stagesPerRank 1 or 2 restricts the search to that placement", () => {
  const costs = { F: 1, I: 1.2, W: 0.8 };
  const one = generateSchedule("zb-auto", { ranks: 4, microBatches: 8, costs, stagesPerRank: 1 });
  assert.equal(one.stagesPerRank, 1);
  const v = generateSchedule("zb-auto", { ranks: 4, microBatches: 8, costs, stagesPerRank: 2 });
  assert.equal(v.stagesPerRank, 2);
  assert.deepEqual(v.stageToRank, [0, 1, 2, 3, 3, 2, 1, 0]);
  validateSchedule(v);
  // Half stages: 2 stage-micro-batches per full-stage unit of the default limit p.
  assert.ok(Math.max(...simulate(v).peakActivations) <= 8);
});

Deno.test("zb-auto: p=4, m=8, 1 : 1.2 : 0.8 with comm 1 beats ZB-H1 at 1F1B's memory and ZB-H2 at 2p−1", () => {
  const costs = { F: 1, I: 1.2, W: 0.8 };
  const comm = 1;
  const bubble = (name: string, memoryLimit?: number) =>
    simulate(
      generateSchedule(name, {
        ranks: 4,
        microBatches: 8,
        costs,
        comm,
        memoryLimit,
        stagesPerRank: 1,
      }),
      { costs, comm },
    ).bubbleFraction;
  assert.ok(bubble("zb-auto", 4) < bubble("zb-h1"));
  assert.ok(bubble("zb-auto", 7) < bubble("zb-h2"));
  assert.ok(bubble("zb-auto", 7) <= bubble("zb-auto", 4));
});

Deno.test("zb-auto: equal costs within ZB-H2's memory reach ZB-H2's single-iteration bubble", () => {
  for (const [p, m] of [[2, 4], [4, 8], [6, 24]]) {
    const auto = simulate(
      generateSchedule("zb-auto", {
        ranks: p,
        microBatches: m,
        memoryLimit: 2 * p - 1,
        stagesPerRank: 1,
      }),
    );
    const h2 = simulate(generateSchedule("zb-h2", { ranks: p, microBatches: m }));
    assert.ok(auto.bubbleFraction <= h2.bubbleFraction + 1e-12);
  }
});

Deno.test("zb-auto: per-stage costs (a slow last stage) are honoured and the order validates", () => {
  const costs = { F: [1, 1, 1, 2], I: [1, 1, 1, 2], W: [0.5, 0.5, 0.5, 1] };
  const s = generateSchedule("zb-auto", {
    ranks: 4,
    microBatches: 8,
    costs,
    memoryLimit: 4,
    stagesPerRank: 1,
  });
  validateSchedule(s);
  const r = simulate(s, { costs });
  const best = Math.min(
    ...["1f1b", "zb-h1"].map((n) =>
      simulate(generateSchedule(n, { ranks: 4, microBatches: 8 }), { costs }).makespan
    ),
  );
  assert.ok(r.makespan <= best + 1e-9);
});

Deno.test("zb-auto: a fractional memory limit counts whole stage-micro-batches", () => {
  const s = generateSchedule("zb-auto", { ranks: 4, microBatches: 8, memoryLimit: 2.5 });
  // Full-stage units: 2 stages, or 5 half stages of a V.
  assert.ok(Math.max(...simulate(s).peakActivations) / s.stagesPerRank <= 2.5);
});

Deno.test("zb-auto: bad memory limit, costs or comm throw before any work", () => {
  const base = { ranks: 2, microBatches: 4 };
  assert.throws(
    () => generateSchedule("zb-auto", { ...base, memoryLimit: 0 }),
    /memoryLimit must be a finite number >= 1, got 0/,
  );
  assert.throws(() => generateSchedule("zb-auto", { ...base, memoryLimit: NaN }), RangeError);
  assert.throws(
    () => generateSchedule("zb-auto", { ...base, comm: -0.1 }),
    /comm must be a finite number >= 0/,
  );
  assert.throws(
    () => generateSchedule("zb-auto", { ...base, costs: { W: [1] } }),
    /costs\.W must have one entry per stage \(2\), got 1/,
  );
  assert.throws(
    () => generateSchedule("zb-auto", { ...base, stagesPerRank: 3 }),
    /zb-auto places 1 stage per rank or 2 in a V, got stagesPerRank 3/,
  );
});
