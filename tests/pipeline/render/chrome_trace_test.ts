import assert from "node:assert/strict";
import { formatAction } from "../../../src/pipeline/schedule/action.ts";
import { type ChromeTraceEvent, toChromeTrace } from "../../../src/pipeline/render/chrome_trace.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { ev, gpipe2x2, splitV2x2 } from "../_hand_events.ts";

Deno.test("toChromeTrace: one complete event per pass, survives JSON", () => {
  const events = splitV2x2().map((e, i) => ({ ...e, iteration: i % 2 }));
  const parsed = JSON.parse(JSON.stringify(toChromeTrace(events)));
  assert.equal(parsed.displayTimeUnit, "ms");
  assert.ok(Array.isArray(parsed.traceEvents));
  const xs: ChromeTraceEvent[] = parsed.traceEvents.filter((e: ChromeTraceEvent) => e.ph === "X");
  assert.equal(xs.length, events.length);
  for (const e of events) {
    const name = `${e.action.kind} mb${e.action.microBatch} s${e.action.stage}`;
    const x = xs.find((x) => x.args?.action === formatAction(e.action));
    assert.ok(x, formatAction(e.action));
    assert.equal(x.name, name);
    assert.equal(x.cat, e.action.kind);
    assert.equal(x.pid, 0);
    assert.equal(x.tid, e.rank);
    assert.equal(x.ts, e.start * 1000);
    assert.equal(x.dur, (e.end - e.start) * 1000);
    assert.deepEqual(x.args, {
      stage: e.action.stage,
      microBatch: e.action.microBatch,
      iteration: e.iteration,
      action: formatAction(e.action),
    });
  }
  const ts = xs.map((x) => x.ts!);
  assert.deepEqual(ts, [...ts].sort((a, b) => a - b), "sorted by start");
});

Deno.test("toChromeTrace: thread_name metadata names every rank's track", () => {
  const trace = toChromeTrace(gpipe2x2(), { ranks: 3, processName: "sim" });
  const meta = trace.traceEvents.filter((e) => e.ph === "M");
  assert.deepEqual(
    meta.filter((m) => m.name === "thread_name").map((m) => [m.pid, m.tid, m.args?.name]),
    [[0, 0, "rank 0"], [0, 1, "rank 1"], [0, 2, "rank 2"]],
  );
  assert.deepEqual(
    meta.filter((m) => m.name === "thread_sort_index").map((m) => m.args?.sort_index),
    [0, 1, 2],
  );
  assert.equal(meta.find((m) => m.name === "process_name")?.args?.name, "sim");
  // metadata carries no timestamps; Perfetto rejects an X event without ts/dur
  for (const m of meta) assert.equal(m.ts, undefined);
  for (const x of trace.traceEvents.filter((e) => e.ph === "X")) {
    assert.equal(typeof x.ts, "number");
    assert.equal(typeof x.dur, "number");
  }
});

Deno.test("toChromeTrace: processPerRank gives each rank its own pid", () => {
  const trace = toChromeTrace(gpipe2x2(), { processPerRank: true });
  for (const e of trace.traceEvents) assert.equal(e.pid, e.tid);
  const names = trace.traceEvents.filter((e) => e.name === "process_name").map((e) => e.args?.name);
  assert.deepEqual(names, ["rank 0", "rank 1"]);
});

Deno.test("toChromeTrace: measured times shift to start at 0 and scale to microseconds", () => {
  const t0 = 5000.25;
  const trace = toChromeTrace([ev(1, "F", 1, 0, t0 + 2, t0 + 2.5), ev(0, "F", 0, 0, t0, t0 + 2)]);
  const xs = trace.traceEvents.filter((e) => e.ph === "X");
  assert.deepEqual(xs.map((x) => [x.tid, x.ts, x.dur]), [[0, 0, 2000], [1, 2000, 500]]);
  const scaled = toChromeTrace([ev(0, "W", 0, 0, 0, 3)], { microsecondsPerUnit: 1 });
  assert.equal(scaled.traceEvents.find((e) => e.ph === "X")?.dur, 3);
});

Deno.test("toChromeTrace: bad options and events throw", () => {
  assert.throws(
    () => toChromeTrace(gpipe2x2(), { microsecondsPerUnit: -1 }),
    /microsecondsPerUnit must be.*got -1/,
  );
  assert.throws(() => toChromeTrace([ev(0.5, "F", 0, 0, 0, 1)]), /rank.*got 0.5/);
});

Deno.test("toChromeTrace: a simulated ZB-V run keeps every action on its rank's track", () => {
  const s = generateSchedule("zb-v", { ranks: 4, microBatches: 8 });
  const sim = simulate(s, { iterations: 2 });
  const trace = toChromeTrace(sim.events);
  const xs = trace.traceEvents.filter((e) => e.ph === "X");
  assert.equal(xs.length, 2 * s.actions.flat().length);
  for (let r = 0; r < 4; r++) {
    for (const it of [0, 1]) {
      const names = xs.filter((x) => x.tid === r && x.args?.iteration === it).map((x) =>
        x.args?.action
      );
      assert.deepEqual(names, s.actions[r].map(formatAction), `rank ${r} iteration ${it}`);
    }
  }
  const last = Math.max(...xs.map((x) => x.ts! + x.dur!));
  assert.ok(Math.abs(last - sim.makespan * 1000) < 1e-6);
});
