import assert from "node:assert/strict";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { checkSchedule } from "../../../src/pipeline/analysis/validate.ts";

Deno.test("SCHEDULE_NAMES lists the CLI names", () => {
  assert.deepEqual(
    [...SCHEDULE_NAMES],
    [
      "gpipe",
      "1f1b",
      "interleaved-1f1b",
      "looped-bfs",
      "zb-h1",
      "zb-h2",
      "zb-v",
      "zb-auto",
      "dualpipe-v",
      "v-half",
      "v-min",
    ],
  );
});

/** The valid V values tried per schedule on the grid. */
const V_GRID: Record<string, number[]> = {
  "interleaved-1f1b": [2, 3, 4],
  "looped-bfs": [1, 2, 3],
  "zb-v": [2],
  "dualpipe-v": [2],
  "v-half": [2],
  "v-min": [2],
};

Deno.test("every schedule validates and is deadlock-free for every valid (p, m, V), p = 1…8, m = 1…32", () => {
  let valid = 0;
  let refused = 0;
  for (const name of SCHEDULE_NAMES) {
    for (let p = 1; p <= 8; p++) {
      for (let m = 1; m <= 32; m++) {
        for (const V of V_GRID[name] ?? [1]) {
          let s;
          try {
            s = generateSchedule(name, { ranks: p, microBatches: m, stagesPerRank: V });
          } catch (e) {
            // Only the documented constraints may refuse a grid point.
            assert.ok(e instanceof RangeError, `${name} p=${p} m=${m} V=${V}: ${e}`);
            const rounds = Math.max(1, Math.floor(m / p));
            const expected = (name === "interleaved-1f1b" && m % rounds !== 0) ||
              (name === "dualpipe-v" && m < 2 * p);
            assert.ok(expected, `${name} p=${p} m=${m} V=${V} refused: ${e.message}`);
            refused++;
            continue;
          }
          assert.equal(s.name, name);
          assert.equal(s.ranks, p);
          assert.equal(s.microBatches, m);
          assert.equal(s.stagesPerRank, V);
          assert.deepEqual(checkSchedule(s), [], `${name} p=${p} m=${m} V=${V}`);
          valid++;
        }
      }
    }
  }
  assert.ok(valid > 2900, `${valid} valid`);
  assert.ok(refused > 0);
});

Deno.test("generateSchedule: default V is 2 for the multi-stage schedules, else 1", () => {
  const V = (name: string) => generateSchedule(name, { ranks: 2, microBatches: 4 }).stagesPerRank;
  // zb-auto has no default: it returns whichever placement its search picks.
  const fixed = SCHEDULE_NAMES.filter((n) => n !== "zb-auto");
  assert.deepEqual(fixed.map(V), [1, 1, 2, 2, 1, 1, 2, 2, 2, 2]);
  assert.ok([1, 2].includes(V("zb-auto")));
});

Deno.test("generateSchedule: parameters are checked in order, with the values in the message", () => {
  const g = (name: unknown, opts: unknown) => () =>
    generateSchedule(name as string, opts as { ranks: number; microBatches: number });
  assert.throws(
    g("pipedream", { ranks: 0 }),
    (e: unknown) =>
      e instanceof TypeError &&
      /unknown schedule "pipedream"; valid names: gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, zb-v, zb-auto, dualpipe-v/
        .test(e.message),
  );
  assert.throws(g(7, { ranks: 2, microBatches: 2 }), TypeError);
  assert.throws(g("1f1b", null), TypeError);
  // ranks before anything else, even when microBatches is bad too
  assert.throws(
    g("1f1b", { ranks: 0, microBatches: 0 }),
    /^RangeError: ranks must be a positive integer, got 0$/,
  );
  assert.throws(
    g("1f1b", { ranks: 2.5, microBatches: 4 }),
    /ranks must be a positive integer, got 2\.5/,
  );
  assert.throws(
    g("1f1b", { ranks: "4", microBatches: 4 }),
    // A string in quotes: "got 4" would read as a valid value refused.
    /ranks must be a positive integer, got "4"/,
  );
  assert.throws(
    g("1f1b", { ranks: 4, microBatches: -1 }),
    /microBatches must be a positive integer, got -1/,
  );
  assert.throws(
    g("1f1b", { ranks: 4, microBatches: 4, stagesPerRank: 0 }),
    /stagesPerRank must be a positive integer, got 0/,
  );
  assert.throws(
    g("looped-bfs", { ranks: 4, microBatches: 4, stagesPerRank: 1.5 }),
    /stagesPerRank must be a positive integer, got 1\.5/,
  );
  // each schedule's own rules
  assert.throws(
    g("1f1b", { ranks: 4, microBatches: 4, stagesPerRank: 2 }),
    /1f1b places one stage per rank, got stagesPerRank 2/,
  );
  assert.throws(g("gpipe", { ranks: 4, microBatches: 4, stagesPerRank: 3 }), RangeError);
  assert.throws(
    g("interleaved-1f1b", { ranks: 4, microBatches: 8, stagesPerRank: 1 }),
    /interleaved-1f1b needs stagesPerRank >= 2, got 1/,
  );
  assert.throws(
    g("interleaved-1f1b", { ranks: 4, microBatches: 9 }),
    /= 2 equal rounds .* microBatches must be a multiple of 2, got microBatches 9 with ranks 4/,
  );
  assert.throws(
    g("zb-v", { ranks: 4, microBatches: 8, stagesPerRank: 3 }),
    /zb-v places exactly 2 stages per rank, got stagesPerRank 3/,
  );
  // schedule rules come before the zb-auto options
  assert.throws(
    g("zb-v", { ranks: 4, microBatches: 8, stagesPerRank: 3, memoryLimit: 0 }),
    /stagesPerRank 3/,
  );
  assert.throws(
    g("1f1b", { ranks: 4, microBatches: 8, memoryLimit: 0.5 }),
    /memoryLimit must be a finite number >= 1, got 0\.5/,
  );
});

Deno.test("generateSchedule: an unknown name lists the valid ones and names the nearest", () => {
  assert.ok(SCHEDULE_NAMES.includes("dualpipe-v"));
  assert.throws(
    () => generateSchedule("dualpipev" as "1f1b", { ranks: 2, microBatches: 4 }),
    (e: Error) =>
      e instanceof TypeError &&
      e.message.startsWith('unknown schedule "dualpipev"; valid names: gpipe,') &&
      e.message.endsWith("; did you mean dualpipe-v?"),
  );
  assert.throws(
    () => generateSchedule("pipedream" as "1f1b", { ranks: 2, microBatches: 4 }),
    (e: Error) => e instanceof TypeError && !e.message.includes("did you mean"),
  );
});

Deno.test("generateSchedule: a misspelt option is named with the one it resembles; other extra keys are left alone", () => {
  const g = (opts: object) => () =>
    generateSchedule("zb-h1", opts as { ranks: number; microBatches: number });
  assert.throws(g({ ranks: 4, microbatches: 8 }), {
    name: "TypeError",
    message: "unknown option microbatches: did you mean microBatches?",
  });
  assert.throws(g({ rank: 4, microBatches: 8 }), {
    name: "TypeError",
    message: "unknown option rank: did you mean ranks?",
  });
  assert.equal(g({ ranks: 2, microBatches: 4, label: "mine" })().actions.length, 2);
});
