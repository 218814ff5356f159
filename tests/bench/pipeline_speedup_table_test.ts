import assert from "node:assert/strict";
import { speedupTable } from "../../bench/pipeline_speedup.ts";

Deno.test("speedupTable: every delimiter cell has a hyphen, so the table renders (a 1-wide P column too)", () => {
  const row = {
    schedule: "1f1b",
    ranks: 2,
    microBatches: 8,
    backend: "cpu",
    stepMs: 1129,
    speedup: 1.75,
    bubbleMeasured: 0.115,
    bubbleSimulated: 0.116,
    idealSpeedup: 1.77,
    costs: {},
  };
  const lines = speedupTable([row]).split("\n");
  const cells = lines[1].split("|").slice(1, -1).map((c) => c.trim());
  assert.ok(cells.every((c) => /^:?-+:?$/.test(c)), lines[1]);
  assert.ok(lines.every((l) => l.split("|").length === lines[0].split("|").length));
});
