import assert from "node:assert/strict";
import { formatAction, parseAction } from "../../../src/pipeline/schedule/action.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";

Deno.test("action text form: PyTorch's stage, kind, micro-batch", () => {
  assert.equal(formatAction({ kind: "F", stage: 2, microBatch: 0 }), "2F0");
  assert.equal(formatAction({ kind: "I", stage: 1, microBatch: 3 }), "1I3");
  assert.deepEqual(parseAction("12W31"), { kind: "W", stage: 12, microBatch: 31 });
  assert.deepEqual(parseAction("  3B1\n"), { kind: "B", stage: 3, microBatch: 1 });
});

Deno.test("action text form round-trips every action of every generated schedule", () => {
  let n = 0;
  for (const name of SCHEDULE_NAMES) {
    const s = generateSchedule(name, { ranks: 4, microBatches: 12 });
    for (const list of s.actions) {
      for (const a of list) {
        assert.deepEqual(parseAction(formatAction(a)), a);
        n++;
      }
    }
  }
  assert.ok(n > 1000);
});

Deno.test("action text form: anything else is a TypeError naming the text", () => {
  for (const bad of ["", "F0", "2F", "2X0", "-1F0", "2F-1", "2 F0", "2f0", "1.5F0", "2F0 3F1"]) {
    assert.throws(
      () => parseAction(bad),
      (e: unknown) => e instanceof TypeError && e.message.includes(JSON.stringify(bad)),
    );
  }
});
