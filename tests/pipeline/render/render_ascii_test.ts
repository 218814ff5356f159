import assert from "node:assert/strict";
import { formatAction } from "../../../src/pipeline/schedule/action.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { renderAscii } from "../../../src/pipeline/render/render_ascii.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { ev, gpipe2x2, splitV2x2 } from "../_hand_events.ts";

/** Splits a rendered row into its cells, dropping the rank label. */
function cells(line: string): string[] {
  return line.split(" ").filter((s) => s.length > 0).slice(1);
}

Deno.test("renderAscii: one line per rank, labelled r0, r1, ...", () => {
  const lines = renderAscii(gpipe2x2()).split("\n");
  assert.equal(lines.length, 2);
  assert.ok(lines[0].startsWith("r0 "));
  assert.ok(lines[1].startsWith("r1 "));
  const wider = renderAscii(gpipe2x2(), { ranks: 5 }).split("\n");
  assert.equal(wider.length, 5);
  assert.equal(renderAscii([], { ranks: 3 }).split("\n").length, 3);
});

Deno.test("renderAscii: time mode puts each pass at its start column, idle as dots", () => {
  const events = gpipe2x2();
  const rows = renderAscii(events).split("\n").map(cells);
  // unit = shortest pass = 1, the span is 0..9: nine columns per rank
  for (const row of rows) assert.equal(row.length, 9);
  for (const e of events) {
    const row = rows[e.rank];
    assert.equal(row[e.start], formatAction(e.action), `${formatAction(e.action)} at ${e.start}`);
    for (let c = e.start + 1; c < e.end; c++) assert.equal(row[c], "---");
  }
  // rank 1 idles before its first forward and after its last backward
  assert.equal(rows[1][0], "...");
  assert.equal(rows[1][7], "...");
  assert.equal(rows[1][8], "...");
  // busy cells add up to the busy time of each rank
  for (let r = 0; r < 2; r++) {
    const busy = events.filter((e) => e.rank === r).reduce((s, e) => s + e.end - e.start, 0);
    assert.equal(rows[r].filter((c) => c !== "...").length, busy);
  }
});

Deno.test("renderAscii: a coarser unit keeps every pass visible and in order", () => {
  const events = gpipe2x2();
  const rows = renderAscii(events, { unit: 2 }).split("\n").map(cells);
  for (let r = 0; r < 2; r++) {
    const labels = rows[r].filter((c) => c !== "..." && c !== "---");
    const expected = events.filter((e) => e.rank === r).sort((a, b) => a.start - b.start)
      .map((e) => formatAction(e.action));
    assert.deepEqual(labels, expected);
  }
});

Deno.test("renderAscii: maxColumns widens the unit of long measured timelines", () => {
  const events = [ev(0, "F", 0, 0, 0, 0.001), ev(0, "B", 0, 0, 50, 60)];
  const row = cells(renderAscii(events, { maxColumns: 100 }));
  assert.ok(row.length <= 101, `got ${row.length} columns`);
  assert.deepEqual(row.filter((c) => c !== "..." && c !== "---"), ["0F0", "0B0"]);
});

Deno.test("renderAscii: slot mode lines up actions that start together", () => {
  const events = splitV2x2();
  const lines = renderAscii(events, { mode: "slot" }).split("\n");
  assert.equal(lines.length, 2);
  const rows = lines.map(cells);
  assert.equal(rows[0].length, rows[1].length);
  const starts = [...new Set(events.map((e) => e.start))].sort((a, b) => a - b);
  for (const e of events) {
    const col = rows[e.rank].indexOf(formatAction(e.action));
    assert.equal(col, starts.indexOf(e.start), formatAction(e.action));
  }
  const total = rows.flat().filter((c) => c !== "...").length;
  assert.equal(total, events.length);
});

Deno.test("renderAscii: cells are as wide as the longest action text", () => {
  const lines = renderAscii([ev(0, "F", 12, 3, 0, 1), ev(1, "W", 0, 0, 1, 2)]).split("\n");
  assert.deepEqual(cells(lines[0]), ["12F3", "...."]);
  assert.deepEqual(cells(lines[1]), ["....", "0W0"]);
  assert.equal(lines[0].length, lines[1].length);
  assert.equal(renderAscii([ev(0, "F", 0, 0, 0, 1)], { labels: false }), "0F0");
});

Deno.test("renderAscii: bad options and events throw before rendering", () => {
  assert.throws(() => renderAscii(gpipe2x2(), { unit: 0 }), /unit must be a positive.*got 0/);
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => renderAscii(gpipe2x2(), { mode: "grid" as any }),
    /mode must be "time" or "slot", got "grid"/,
  );
  assert.throws(() => renderAscii(gpipe2x2(), { maxColumns: 0 }), RangeError);
  assert.throws(() => renderAscii([ev(0, "F", 0, 0, 2, 1)]), /events\[0\] \(0F0\).*2\.\.1/);
  assert.throws(() => renderAscii([ev(-1, "F", 0, 0, 0, 1)]), /rank must be.*got -1/);
  assert.throws(() => renderAscii(gpipe2x2(), { ranks: 1.5 }), /ranks must be.*got 1.5/);
});

Deno.test("renderAscii: every generated schedule at p=4, m=8 shows each action once", () => {
  for (const name of SCHEDULE_NAMES) {
    const s = generateSchedule(name, { ranks: 4, microBatches: 8 });
    const sim = simulate(s);
    for (const mode of ["time", "slot"] as const) {
      const rows = renderAscii(sim.events, { mode }).split("\n").map(cells);
      assert.equal(rows.length, 4, `${name} ${mode}`);
      for (let r = 0; r < 4; r++) {
        const shown = rows[r].filter((c) => c !== "...." && c !== "..." && !/^-+$/.test(c));
        assert.deepEqual(shown, s.actions[r].map(formatAction), `${name} ${mode} rank ${r}`);
      }
    }
    // with unit costs every column is one time unit: the grid is makespan wide
    const timeRows = renderAscii(sim.events).split("\n").map(cells);
    assert.equal(timeRows[0].length, sim.makespan, name);
  }
});
