import assert from "node:assert/strict";
import { noiseVerdict } from "../../bench/_noise.ts";

Deno.test("noiseVerdict: steady when every row spreads by at most 15% of its median, naming the widest", () => {
  const line = noiseVerdict([
    { label: "(1, 1)", medianMs: 600, spreadMs: 30 }, // 5%
    { label: "(2, 1)", medianMs: 350, spreadMs: 52.5 }, // 15%: still steady
  ]);
  assert.equal(
    line,
    "Steady run: every row's rounds spread by at most 15% of its median ((2, 1)).",
  );
});

Deno.test("noiseVerdict: noisy names the worst row, its spread and median; bad input is refused", () => {
  const line = noiseVerdict([
    { label: "workers (1, 1)", medianMs: 622, spreadMs: 17.8 },
    { label: "workers (2, 1)", medianMs: 400, spreadMs: 120 }, // 30%
    { label: "MPI (2, 1)", medianMs: 370, spreadMs: 70 }, // 19%
  ]);
  assert.match(
    line,
    /^Noisy run: the rounds of workers \(2, 1\) spread by 30% of their median \(120\.0 of 400\.0 ms; steady is at most 15%\)/,
  );
  assert.match(
    noiseVerdict([{ label: "a", medianMs: 100, spreadMs: 11 }], 0.1),
    /^Noisy run: .* 11% .* at most 10%/,
  );
  assert.throws(() => noiseVerdict([]), /at least one row, got none/);
  assert.throws(
    () => noiseVerdict([{ label: "x", medianMs: 0, spreadMs: 1 }]),
    /row x: the median must be a positive number, got 0/,
  );
});
