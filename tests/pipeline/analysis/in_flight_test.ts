import assert from "node:assert/strict";
import { checkInFlightCap, inFlightPeaks } from "../../../src/pipeline/analysis/in_flight.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";

Deno.test("inFlightPeaks: one stage per rank gives simulate's per-rank peak activations", () => {
  // The schedules that accept one stage per rank; interleaved-1f1b, zb-v,
  // dualpipe-v, v-half and v-min need V >= 2 and are compared per rank in the next test.
  const single = ["gpipe", "1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-auto"];
  assert.deepEqual(
    SCHEDULE_NAMES.filter((n) => !single.includes(n)),
    ["interleaved-1f1b", "zb-v", "dualpipe-v", "v-half", "v-min"],
  );
  for (const name of single) {
    for (const ranks of [2, 4]) {
      const s = generateSchedule(name, { ranks, microBatches: 8, stagesPerRank: 1 });
      const peaks = inFlightPeaks(s);
      const sim = simulate(s).peakActivations;
      s.stageToRank.forEach((r, stage) => {
        assert.equal(peaks[stage], sim[r], `${name} p=${ranks}: stage ${stage}`);
      });
    }
  }
});

Deno.test("inFlightPeaks: with V = 2 each rank's stage peaks bound simulate's rank peak", () => {
  for (const name of ["interleaved-1f1b", "looped-bfs", "zb-v", "dualpipe-v", "v-half", "v-min"]) {
    const s = generateSchedule(name, { ranks: 2, microBatches: 8 });
    const peaks = inFlightPeaks(s);
    const sim = simulate(s).peakActivations;
    for (let r = 0; r < s.ranks; r++) {
      const mine = peaks.filter((_, stage) => s.stageToRank[stage] === r);
      assert.ok(Math.max(...mine) <= sim[r], `${name} rank ${r}: one stage within the rank`);
      assert.ok(sim[r] <= mine.reduce((a, b) => a + b, 0), `${name} rank ${r}: sum bounds it`);
    }
  }
});

Deno.test("checkInFlightCap: 0 means no cap; the cap at the peak passes; below it names the worst stage", () => {
  const s = generateSchedule("1f1b", { ranks: 4, microBatches: 8 }); // stages hold 4, 3, 2, 1
  checkInFlightCap(s, 0);
  checkInFlightCap(s, 4);
  assert.throws(
    () => checkInFlightCap(s, 3),
    (e: Error) =>
      e instanceof RangeError &&
      e.message.startsWith(
        "checkpoint.maxActivationsInMemory = 3 is below the 4 micro-batches stage 0 holds at once under 1f1b (p = 4, m = 8)",
      ),
  );
});
