import assert from "node:assert/strict";
import { estimateBubbleFraction } from "../../src/pipeline/analysis/bubble_estimate.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../src/pipeline/analysis/simulate.ts";
import {
  formatScheduleTable,
  MISSING,
  type ScheduleTableRow,
  simulatedTableRows,
  tableHeader,
  withMeasurement,
} from "../../bench/_schedule_table.ts";
import type { RuntimeRow } from "../../bench/measured_vs_simulated.ts";

/** Splits a Markdown table into trimmed cells per line. */
function cells(table: string): string[][] {
  return table.split("\n").map((line) => {
    assert.ok(line.startsWith("|") && line.endsWith("|"), `not a table line: ${line}`);
    return line.slice(1, -1).split("|").map((c) => c.trim());
  });
}

/** A percentage, a plain number, or NaN for the missing mark; throws on anything else. */
function parseCell(text: string): number {
  if (text === MISSING) return NaN;
  const v = Number(text.endsWith("%") ? text.slice(0, -1) : text);
  assert.ok(Number.isFinite(v), `cell "${text}" is not a number`);
  return text.endsWith("%") ? v / 100 : v;
}

function fakeRun(row: ScheduleTableRow, k: number): RuntimeRow {
  return {
    schedule: row.schedule,
    p: row.p,
    m: row.m,
    v: row.v,
    ms: 20,
    measuredMakespanMs: 1000 + k,
    simulatedMakespanMs: 1000,
    ratio: 1.01 + k / 1000,
    measuredBubble: row.bubble + 0.01,
    simulatedBubble: row.bubble,
    iterations: row.iterations,
    steadyFrom: row.iterations - 1,
    steadyRatio: 1.02,
    measuredSteadyBubble: 0.0123,
    simulatedSteadyBubble: row.steadyBubble,
  };
}

Deno.test("simulatedTableRows lists every schedule at p=4, m=8 with simulate()'s figures", () => {
  const rows = simulatedTableRows(4, 8, 3);
  assert.deepEqual(rows.map((r) => r.schedule), [...SCHEDULE_NAMES]);
  for (const r of rows) {
    const schedule = generateSchedule(r.schedule, { ranks: 4, microBatches: 8 });
    const one = simulate(schedule);
    const three = simulate(schedule, { iterations: 3 });
    assert.equal(r.v, schedule.stagesPerRank, r.schedule);
    assert.equal(r.bubble, one.bubbleFraction, r.schedule);
    assert.equal(r.steadyBubble, three.steadyStateBubble, r.schedule);
    assert.equal(r.peak0, one.peakActivations[0], r.schedule);
    assert.equal(r.peak0Stages * r.v, r.peak0, r.schedule);
    const formula = estimateBubbleFraction(r.schedule, 4, 8);
    assert.ok(
      Object.is(r.formulaBubble, formula),
      `${r.schedule}: ${r.formulaBubble} vs ${formula}`,
    );
    for (const k of ["measuredBubble", "measuredSteadyBubble", "makespanRatio", "ms"] as const) {
      assert.ok(Number.isNaN(r[k]), `${r.schedule}.${k} should be unmeasured`);
    }
  }
});

Deno.test("simulatedTableRows leaves out schedules that refuse (p, m) and checks its arguments", () => {
  // dualpipe-v needs m >= 2p.
  const names = simulatedTableRows(4, 4, 2).map((r) => r.schedule);
  assert.ok(!names.includes("dualpipe-v"));
  assert.ok(names.includes("1f1b") && names.includes("zb-v"));
  assert.throws(() => simulatedTableRows(0, 8, 3), /ranks must be a positive integer, got 0/);
  assert.throws(() => simulatedTableRows(4, 1.5, 3), /microBatches must be .* got 1.5/);
  assert.throws(() => simulatedTableRows(4, 8, 1), RangeError);
});

Deno.test("formatScheduleTable: one line per schedule, every figure parses back", () => {
  const sim = simulatedTableRows(4, 8, 3);
  const rows = sim.map((r, k) => withMeasurement(r, fakeRun(r, k)));
  const [head, rule, ...body] = cells(formatScheduleTable(rows));
  assert.deepEqual(head, tableHeader(3));
  assert.ok(rule.every((c) => /^:?-+:?$/.test(c)), `bad rule ${rule}`);
  assert.equal(body.length, rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    const [name, ...rest] = body[i];
    assert.equal(name, r.schedule);
    const v = rest.map(parseCell);
    const [V, bubble, steady, formula, peak, peakStages, mBubble, mSteady, ratio, steadyRatio] = v;
    assert.equal(V, r.v);
    assert.ok(Math.abs(bubble - r.bubble) <= 0.0005, `${r.schedule} bubble ${bubble}`);
    assert.ok(Math.abs(steady - r.steadyBubble) <= 0.0005, `${r.schedule} steady ${steady}`);
    if (Number.isNaN(r.formulaBubble)) assert.ok(Number.isNaN(formula));
    else assert.ok(Math.abs(formula - r.formulaBubble) <= 0.0005);
    assert.equal(peak, r.peak0);
    assert.ok(Math.abs(peakStages - r.peak0Stages) <= 0.005);
    assert.ok(Math.abs(mBubble - r.measuredBubble) <= 0.0005);
    assert.ok(Math.abs(mSteady - 0.0123) <= 0.0005);
    assert.ok(Math.abs(ratio - r.makespanRatio) <= 0.0005);
    assert.equal(steadyRatio, 1.02);
    // Only the formula column may be missing once measured (zb-auto, dualpipe-v).
    assert.deepEqual(
      v.map((x, j) => Number.isNaN(x) ? j : -1).filter((j) => j >= 0),
      Number.isNaN(r.formulaBubble) ? [3] : [],
    );
  }
});

Deno.test("unmeasured rows print the missing mark; a mismatched measurement is refused", () => {
  const [row] = simulatedTableRows(2, 4, 2);
  const [, , line] = cells(formatScheduleTable([row]));
  assert.deepEqual(line.slice(-4), [MISSING, MISSING, MISSING, MISSING]);
  assert.throws(
    () => withMeasurement(row, { ...fakeRun(row, 0), schedule: "zb-h2" }),
    /measurement of zb-h2 p=2 m=4 .* does not match row gpipe p=2 m=4/,
  );
  assert.throws(() => withMeasurement(row, { ...fakeRun(row, 0), iterations: 5 }), TypeError);
});
