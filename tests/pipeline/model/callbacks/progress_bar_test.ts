import assert from "node:assert/strict";
import { ProgressBar } from "../../../../src/pipeline/model/callbacks/progress_bar.ts";
import type { StepResult } from "../../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpuModel, tokenBatches } from "../_reference_training.ts";

const ctx = { exact: true, stop: () => {} };
const step = (k: number, loss: number, extra: Partial<StepResult> = {}) =>
  ({ step: k, loss, lr: 0.01, ...extra }) as StepResult;

Deno.test("ProgressBar on a terminal: one line redrawn in place with the bar, step/total, loss, ms/step and ETA; a newline at the end", () => {
  let out = "";
  const bar = new ProgressBar({ total: 4, tty: true, width: 8, write: (t) => void (out += t) });
  bar.onTrainBegin({ firstStep: 0, localRank: null });
  bar.onStepEnd(step(0, 3.25), ctx);
  bar.onStepEnd(step(1, 2.5), { ...ctx, validation: { loss: 2.75, rows: 8, accuracy: 0.125 } });
  bar.onStepEnd(step(2, NaN, { skipped: true, nonFinite: { stage: 1, what: "loss" } }), ctx);
  bar.onTrainEnd({} as never);
  const frames = out.split("\r").slice(1);
  assert.equal(frames.length, 3);
  assert.match(
    frames[0],
    /^\[##------\] step 1\/4 {2}loss 3\.250 {2}\d+ ms\/step {2}ETA \d+ (ms|s)$/,
  );
  assert.match(
    frames[1],
    /^\[####----\] step 2\/4 {2}loss 2\.500 {2}\d+ ms\/step {2}ETA .* {2}validation 2\.750 \(12\.5%\)$/,
  );
  assert.match(
    frames[2],
    /^\[######--\] step 3\/4 {2}loss NaN {2}skipped \(non-finite loss\) .*validation 2\.750/,
  );
  assert.ok(out.endsWith("\n") && !frames[1].includes("\n"), "one line, ended once");
});

Deno.test("ProgressBar off a terminal: quiet by default, one line every N steps (and the last) with every", () => {
  for (const [every, want] of [[0, []], [2, [2, 4, 5]]] as const) {
    let out = "";
    const bar = new ProgressBar({ total: 5, tty: false, every, write: (t) => void (out += t) });
    bar.onTrainBegin({ firstStep: 0, localRank: null });
    for (let k = 0; k < 5; k++) bar.onStepEnd(step(k, 1), ctx);
    bar.onTrainEnd({} as never);
    const lines = out.split("\n").filter((l) => l !== "");
    assert.deepEqual(lines.map((l) => Number(/^step (\d)\/5 {2}loss 1\.000 /.exec(l)![1])), want);
  }
  // Under MPI, ranks other than 0 print nothing.
  let out = "";
  const bar = new ProgressBar({ tty: true, write: (t) => void (out += t) });
  bar.onTrainBegin({ firstStep: 0, localRank: 1 });
  bar.onStepEnd(step(0, 1), ctx);
  bar.onTrainEnd({} as never);
  assert.equal(out, "");
});

Deno.test("ProgressBar in train: the total is the array's end (a resumed model counts on), the status option adds text, and it keeps the windows (no model use)", async () => {
  await using m = await cpuModel({
    schedule: "1f1b",
    microBatches: 4,
    optimizer: { kind: "sgd", lr: 0.1 },
  });
  const batches = tokenBatches(6, 8);
  await m.train(batches.slice(0, 2));
  let out = "";
  let pulled = 0;
  const seen: number[] = [];
  function* source() {
    for (const b of batches.slice(2)) {
      pulled++;
      yield b;
    }
  }
  const bar = new ProgressBar({
    tty: false,
    every: 1,
    status: (s) => `lr ${s.lr}`,
    write: (t) => void (out += t),
  });
  await m.train(source(), {
    window: 4,
    callbacks: [bar, { onStepEnd: () => void seen.push(pulled) }],
  });
  assert.deepEqual(seen, [4, 4, 4, 4], "one window of 4: nothing made a step exact");
  assert.match(out.split("\n")[0], /^step 3 {2}loss \d\.\d{3} {2}\d+ ms\/step {2}lr 0\.1$/);
  out = "";
  await m.train(batches.slice(0, 2), { callbacks: [bar] });
  assert.match(out, /^step 7\/8 {2}.*ETA .*\nstep 8\/8 /);
});

Deno.test("ProgressBar: bad options refused naming them", () => {
  assert.throws(
    () => new ProgressBar({ total: 0 }),
    /ProgressBar: total must be a positive integer, got 0/,
  );
  assert.throws(() => new ProgressBar({ every: -1 }), /every must be an integer >= 0, got -1/);
  assert.throws(() => new ProgressBar({ write: 3 as never }), /write must be a function/);
  assert.throws(
    () => new ProgressBar({ totl: 5 } as never),
    /^TypeError: ProgressBar: unknown option totl: did you mean total\?/,
  );
});

Deno.test("ProgressBar: losses to 4 significant digits, so a regression's small loss keeps its digits (was 0.002 for 0.00161)", () => {
  let out = "";
  const bar = new ProgressBar({ tty: false, every: 1, write: (t) => void (out += t) });
  bar.onTrainBegin({ firstStep: 0, localRank: null, steps: 3 });
  bar.onStepEnd(step(0, 0.0016123), { ...ctx, validation: { loss: 0.0011712, rows: 8 } });
  bar.onStepEnd(step(1, 3.3594), ctx);
  bar.onStepEnd(step(2, 123456.7), ctx);
  const lines = out.trimEnd().split("\n");
  assert.match(lines[0], /^step 1\/3 {2}loss 0\.001612 .* {2}validation 0\.001171$/);
  assert.match(lines[1], /loss 3\.359 /);
  assert.match(lines[2], /loss 123457 /);
});
