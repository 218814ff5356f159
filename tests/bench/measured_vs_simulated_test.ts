import assert from "node:assert/strict";
import { type RuntimeRow, verdict, VERDICT_BOUNDS } from "../../bench/measured_vs_simulated.ts";

function row(schedule: string, ratio: number, steadyRatio: number, steady: number): RuntimeRow {
  return {
    schedule,
    p: 4,
    m: 8,
    v: 1,
    ms: 20,
    measuredMakespanMs: 540 * ratio,
    simulatedMakespanMs: 540,
    ratio,
    measuredBubble: 0.12,
    simulatedBubble: 0.111,
    iterations: 8,
    steadyFrom: 2,
    steadyRatio,
    measuredSteadyBubble: steady,
    simulatedSteadyBubble: 0,
  };
}

Deno.test("verdict passes within the bounds and names the worst ratio", () => {
  const line = verdict([row("1f1b", 1.04, 1.02, 0.28), row("zb-h2", 1.03, 1.07, 0.015)]);
  assert.match(line, /^verdict: PASS /);
  assert.match(line, /zb-h2 steady-state bubble 1\.5%/);
  assert.match(line, /worst ratio 1\.070 \(zb-h2, 8 it\)/);
  assert.doesNotMatch(line, /over:/);
});

Deno.test("verdict fails on ZB-H2's steady-state bubble or any ratio over its bound, naming each", () => {
  const { zbH2SteadyBubble: bubble, makespanRatio: ratio } = VERDICT_BOUNDS;
  const steady = verdict([row("zb-h2", 1.0, 1.0, bubble + 0.001)]);
  assert.match(steady, /^verdict: FAIL .*over: zb-h2 steady-state bubble 2\.1%$/);
  const ratios = verdict([row("gpipe", ratio + 0.01, 1.0, 0.27), row("zb-h2", 1.0, ratio, 0)]);
  assert.match(ratios, /^verdict: FAIL .*over: gpipe makespan ratio 1\.110 \(1 it\)$/);
  // A figure that was not measured (NaN) is not a pass.
  assert.match(verdict([row("zb-h2", 1.0, 1.0, NaN)]), /^verdict: FAIL/);
  // Without a ZB-H2 row only the ratios are judged.
  assert.match(verdict([row("1f1b", 1.05, 1.05, 0.3)]), /^verdict: PASS .*zb-h2 not run/);
});
