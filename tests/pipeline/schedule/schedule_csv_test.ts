import assert from "node:assert/strict";
import type { Action } from "../../../src/pipeline/schedule/action.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { scheduleFromCsv, scheduleToCsv } from "../../../src/pipeline/schedule/schedule_csv.ts";

const a = (kind: Action["kind"], stage: number, microBatch: number): Action => ({
  kind,
  stage,
  microBatch,
});

Deno.test("schedule CSV: a hand-made ZB-style schedule round-trips", () => {
  const ranks: Action[][] = [
    [a("F", 0, 0), a("F", 0, 1), a("I", 0, 0), a("F", 0, 2), a("W", 0, 0), a("B", 0, 1)],
    [a("F", 1, 0), a("I", 1, 0), a("W", 1, 0), a("F", 1, 1), a("B", 1, 1)],
    [],
    [a("F", 13, 127), a("B", 13, 127)],
  ];
  const csv = scheduleToCsv(ranks);
  assert.equal(csv.split("\n").length, ranks.length + 1);
  assert.ok(csv.startsWith("0F0,0F1,0I0,"));
  assert.deepEqual(scheduleFromCsv(csv), ranks);
  assert.deepEqual(scheduleFromCsv(""), []);
  assert.equal(scheduleToCsv([]), "");
});

Deno.test("schedule CSV: idle slots export as empty cells and are skipped on import", () => {
  const csv = scheduleToCsv([[a("F", 0, 0), null, a("B", 0, 0)], [null, a("F", 1, 0), null]]);
  assert.equal(csv, "0F0,,0B0\n,1F0,\n");
  assert.deepEqual(scheduleFromCsv(csv), [[a("F", 0, 0), a("B", 0, 0)], [a("F", 1, 0)]]);
});

Deno.test("schedule CSV: reads Python csv.writer output (CRLF, quotes, spaces, no final newline)", () => {
  const text = '0F0,1F0\r\n,"0B0", 1W0 \r\n0I3';
  assert.deepEqual(scheduleFromCsv(text), [
    [a("F", 0, 0), a("F", 1, 0)],
    [a("B", 0, 0), a("W", 1, 0)],
    [a("I", 0, 3)],
  ]);
});

Deno.test("schedule CSV: a bad cell names its row and column", () => {
  assert.throws(
    () => scheduleFromCsv("0F0,0B0\n1F0,,2X0\n"),
    (err: Error) =>
      err instanceof TypeError && /row 2, column 3/.test(err.message) &&
      err.message.includes('"2X0"'),
  );
  assert.throws(() => scheduleFromCsv("F0"), /row 1, column 1: .*"F0"/);
  assert.throws(() => scheduleFromCsv("0F0;0B0"), /row 1, column 1/);
});

Deno.test("schedule CSV: export refuses what is not an action", () => {
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => scheduleToCsv([[a("F", 0, 0), { kind: "X", stage: 0, microBatch: 0 } as any]]),
    /rows\[0\]\[1\] must be an action.*"X"/,
  );
  assert.throws(() => scheduleToCsv([[a("F", -1, 0)]]), /rows\[0\]\[0\]/);
  // deno-lint-ignore no-explicit-any
  assert.throws(() => scheduleToCsv(["0F0" as any]), /rows\[0\] must be an array/);
});

Deno.test("schedule CSV: every generated schedule round-trips on a small grid", () => {
  for (const name of SCHEDULE_NAMES) {
    for (const [p, m] of [[1, 1], [2, 4], [3, 5], [4, 8]]) {
      let s;
      try {
        s = generateSchedule(name, { ranks: p, microBatches: m });
      } catch (err) {
        if (err instanceof RangeError) continue; // a (p, m) this schedule refuses
        throw err;
      }
      const back = scheduleFromCsv(scheduleToCsv(s.actions));
      assert.deepEqual(
        back,
        s.actions.map((row) => row.map((x) => ({ ...x }))),
        `${name} ${p}x${m}`,
      );
    }
  }
});
