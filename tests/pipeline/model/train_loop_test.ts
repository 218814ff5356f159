import assert from "node:assert/strict";
import { summarizeTimeline } from "../../../src/pipeline/analysis/timeline_summary.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import { lrAt, type LrScheduleSpec } from "../../../src/nn/lr_schedule.ts";
import type {
  PipelineParallelModelOptions,
  StepResult,
  TrainingBatch,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { cpuModel, tokenBatches } from "./_reference_training.ts";

const STEPS = 6;
const batches = tokenBatches(STEPS, 8, 21);
const SCHEDULE: LrScheduleSpec = {
  kind: "warmup-cosine",
  warmupSteps: 2,
  decaySteps: 4,
  startFactor: 0.25,
};
const SPEC: OptimizerSpec = { kind: "adamw", lr: 1e-2, lrSchedule: SCHEDULE };

function build(options: Partial<PipelineParallelModelOptions> = {}) {
  return cpuModel({ schedule: "zb-h1", microBatches: 4, optimizer: SPEC, ...options });
}

function* syncSource(list: readonly TrainingBatch[], log?: { pulled: number; returned: boolean }) {
  try {
    for (const b of list) {
      if (log) log.pulled++;
      yield b;
    }
  } finally {
    if (log) log.returned = true;
  }
}

async function* asyncSource(
  list: readonly TrainingBatch[],
  log?: { pulled: number; returned: boolean },
) {
  try {
    for (const b of list) {
      await new Promise((r) => setTimeout(r, 1)); // a loader that takes time
      if (log) log.pulled++;
      yield b;
    }
  } finally {
    if (log) log.returned = true;
  }
}

const reference = await (async () => {
  await using m = await build();
  const r = await m.train(batches);
  return { bytes: await m.checkpointBytes(), losses: r.steps.map((s) => s.loss) };
})();

Deno.test("train: an array, an iterable and an async iterable, in any window, give the same steps bit for bit; lr follows the schedule", async () => {
  const sources: [string, () => Iterable<TrainingBatch> | AsyncIterable<TrainingBatch>, number?][] =
    [
      ["array, window 1", () => batches, 1],
      ["array, window 4", () => batches, 4],
      ["iterable (default window)", () => syncSource(batches)],
      ["iterable, window 5", () => syncSource(batches), 5],
      ["async iterable (default window)", () => asyncSource(batches)],
      ["async iterable, window 1", () => asyncSource(batches), 1],
    ];
  for (const [label, source, window] of sources) {
    await using m = await build();
    const r = await m.train(source(), window === undefined ? {} : { window });
    assert.deepEqual(r.steps.map((s) => s.step), [0, 1, 2, 3, 4, 5], label);
    assert.deepEqual(r.steps.map((s) => s.loss), reference.losses, `${label}: losses`);
    assert.deepEqual(
      r.steps.map((s) => s.lr),
      [0, 1, 2, 3, 4, 5].map((t): number => lrAt(SCHEDULE, 1e-2, t)),
      `${label}: lr`,
    );
    assert.deepEqual(await m.checkpointBytes(), reference.bytes, `${label}: state`);
    assert.equal(r.aborted, false);
  }
});

Deno.test("train: onStep gets every StepResult in order (awaited), each with the model and the source standing exactly after its step whatever the window, and the model may be used from it", async () => {
  for (const kind of ["sync", "async"] as const) {
    const log = { pulled: 0, returned: false };
    const seen: StepResult[] = [];
    const ahead: number[] = [];
    await using m = await build();
    const evals: number[] = [];
    const r = await m.train(
      kind === "sync" ? syncSource(batches, log) : asyncSource(batches, log),
      {
        window: 2,
        onStep: async (s) => {
          await new Promise((res) => setTimeout(res, 1));
          seen.push(s);
          // Batches pulled beyond this step: none (onStep makes every step exact).
          ahead.push(log.pulled - (s.step + 1));
          assert.equal(m.stepCount, s.step + 1, "the model stands after this step");
          if (s.step % 2 === 1) evals.push((await m.evaluate(batches[0])).loss);
        },
      },
    );
    assert.deepEqual(seen, r.steps, `${kind}: onStep saw each result`);
    for (const s of seen) {
      assert.ok(Number.isFinite(s.loss) && s.lr > 0 && s.bubble >= 0 && s.bubble < 1);
      assert.ok(s.makespanMs > 0 && s.busyMs.length === 2);
    }
    assert.deepEqual(ahead, [0, 0, 0, 0, 0, 0], `${kind}: nothing pulled ahead of onStep`);
    assert.equal(evals.length, 3);
    assert.ok(evals[2] < evals[0], "evaluations inside onStep see training progress");
    assert.equal(log.pulled, STEPS);
  }
});

Deno.test("train: an AbortSignal stops after the current window; the call resolves with the steps done, the source is closed, the model stays usable", async () => {
  await using m = await build();
  const controller = new AbortController();
  const log = { pulled: 0, returned: false };
  const r = await m.train(asyncSource(batches, log), {
    window: 1,
    signal: controller.signal,
    onStep: (s) => {
      if (s.step === 2) controller.abort();
    },
  });
  assert.equal(r.aborted, true);
  assert.deepEqual(r.steps.map((s) => s.step), [0, 1, 2]);
  assert.ok(log.returned, "the generator's finally ran");
  assert.equal(m.stepCount, 3);
  // Usable: the rest continues exactly as the uninterrupted run.
  const rest = await m.train(batches.slice(3));
  assert.deepEqual(rest.steps.map((s) => s.loss), reference.losses.slice(3));
  assert.deepEqual(await m.checkpointBytes(), reference.bytes);
  // Aborted before the start: nothing runs.
  const none = await m.train(batches, { signal: AbortSignal.abort() });
  assert.deepEqual([none.steps.length, none.aborted, m.stepCount], [0, true, 6]);
  // An array with a signal aborting mid-call, in windows of 2 (a callback that reads results
  // alone keeps the windows).
  const c2 = new AbortController();
  const part = await m.train(batches, {
    window: 2,
    signal: c2.signal,
    callbacks: [{ onStepEnd: () => c2.abort() }],
  });
  assert.deepEqual([part.steps.length, part.aborted], [2, true]);
});

Deno.test("train: a bad batch mid-stream, a failing source or onStep reject with their error after the steps before them; the model stays usable", async () => {
  await using m = await build();
  const bad = [...batches.slice(0, 3), { ...batches[3], targets: new Float32Array(3) }];
  await assert.rejects(
    () => m.train(syncSource(bad), { window: 1 }),
    (e: Error) =>
      e instanceof RangeError && /^batches\[3\]\.targets must be a Float32Array/.test(e.message),
  );
  assert.equal(m.stepCount, 3, "the three good steps ran");
  async function* failing() {
    yield batches[3];
    throw new Error("disk gone");
  }
  await assert.rejects(() => m.train(failing(), { window: 1 }), /disk gone/);
  assert.equal(m.stepCount, 4);
  await assert.rejects(() =>
    m.train([batches[4]], {
      onStep: () => {
        throw new Error("logger broke");
      },
    }), /logger broke/);
  assert.equal(m.stepCount, 5);
  await assert.rejects(
    () => m.train([batches[5]], { onStep: async () => void await m.train([batches[5]]) }),
    /already training: train\(\) cannot nest/,
  );
  assert.equal(m.stepCount, 6);
  assert.deepEqual(await m.checkpointBytes(), reference.bytes, "the same six batches were trained");
  // An array with a bad batch runs nothing.
  await assert.rejects(() => m.train([batches[0], bad[3]]), /^RangeError: batches\[1\]\.targets/);
  assert.equal(m.stepCount, 6);
});

Deno.test("train: bad arguments are refused with the value and the rule", async () => {
  await using m = await build();
  const cases: [unknown, unknown, RegExp][] = [
    [
      42,
      undefined,
      /batches must be an array, an iterable or an async iterable of batches, got number/,
    ],
    [batches, { window: 0 }, /window must be a positive integer, got 0/],
    [batches, { signal: {} }, /signal must be an AbortSignal/],
    [batches, { onStep: 3 }, /onStep must be a function/],
    // A misspelt option would be ignored (a progress bar that never prints).
    [
      batches,
      { callback: [] },
      /^TypeError: train: unknown option callback: did you mean callbacks\?/,
    ],
    [batches, { onstep: () => {} }, /train: unknown option onstep: did you mean onStep\?/],
    [batches, null, /train options must be an object/],
    [batches, { callbacks: {} }, /callbacks must be an array of TrainCallback, got object/],
    [batches, { callbacks: [null] }, /callbacks\[0\] must be an object/],
    [
      batches,
      { callbacks: [{}, { every: 0 }] },
      /callbacks\[1\]\.every must be a positive integer, got 0/,
    ],
    [batches, { callbacks: [{ onStepEnd: 1 }] }, /callbacks\[0\]\.onStepEnd must be a function/],
    [
      batches,
      { validation: { batch: batches[0], every: 1.5 } },
      /validation\.every must be a positive integer, got 1\.5/,
    ],
    [
      batches,
      { validation: { batch: batches[0] } },
      /validation\.every must be a positive integer, got undefined/,
    ],
    [
      batches,
      { validation: { batch: { ...batches[0], targets: new Float32Array(2) }, every: 2 } },
      /^RangeError: validation\.batch\.targets/,
    ],
  ];
  for (const [b, o, re] of cases) {
    await assert.rejects(() => m.train(b as never, o as never), re);
  }
  assert.equal(m.stepCount, 0);
});

Deno.test("train: steadyStateBubble comes from the median period over the call's steps (as the benches), across windows on one clock", async () => {
  for (const workers of [false, true]) {
    await using m = await build({ rankGroup: workers ? "workers" : "in-process" });
    const r = await m.train(syncSource(tokenBatches(8, 8, 3)), { window: 3 });
    const ev = r.events;
    assert.equal(ev.length, r.steps.reduce((a, s) => a + s.events.length, 0));
    for (let i = 1; i < ev.length; i++) {
      assert.ok(ev[i].start >= ev[i - 1].start, "one clock, sorted");
    }
    // Windows follow one another: each step's events start after the previous window's end.
    const end = (k: number) => Math.max(...r.steps[k].events.map((e) => e.end));
    const start = (k: number) => Math.min(...r.steps[k].events.map((e) => e.start));
    assert.ok(start(3) >= end(2) && start(6) >= end(5), "windows in order on the call's clock");
    const want = summarizeTimeline(ev, 2, { steadyFrom: 1 });
    assert.equal(r.steadyStateBubble, want.steadyStateBubble);
    assert.equal(r.makespanMs, want.makespan);
    assert.equal(r.bubble, want.bubbleFraction);
    // Not the last period alone (unless the median happens to be it).
    const last = summarizeTimeline(ev, 2);
    assert.ok(want.period! > 0 && last.period! > 0);
  }
  assert.equal(liveWorkers(), 0);
});

Deno.test("train: during an async train(), loadCheckpoint, setLearningRate and loadSafetensors made between windows from outside onStep are refused naming the call, the model is unchanged and the steps are numbered 0, 1, 2; from onStep setLearningRate and loadSafetensors work, loadCheckpoint is refused", async () => {
  await using m = await build();
  const atZero = await m.checkpointBytes();
  const weights = await m.saveSafetensors();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let stepped!: () => void;
  const firstStep = new Promise<void>((r) => (stepped = r));
  async function* source() {
    yield batches[0];
    await gate; // the loop waits here for window 2: between windows
    yield batches[1];
    yield batches[2];
  }
  const training = m.train(source(), { window: 1, onStep: () => stepped() });
  await firstStep;
  await new Promise((r) => setTimeout(r, 10)); // onStep has returned; the loop awaits the source
  const refused = (call: string, where: RegExp) => (e: Error) => {
    assert.match(
      e.message,
      new RegExp(`^${call}: the model is training \\(a train\\(\\) call is running\\)`),
    );
    assert.match(e.message, where);
    return true;
  };
  await assert.rejects(
    m.loadCheckpoint(atZero),
    refused(
      "loadCheckpoint",
      /call it after train\(\) resolves \(stop train with its signal first\)/,
    ),
  );
  await assert.rejects(
    m.setLearningRate(0.5),
    refused("setLearningRate", /call it from train's onStep, or after train\(\) resolves/),
  );
  await assert.rejects(
    m.loadSafetensors(weights),
    refused("loadSafetensors", /from train's onStep/),
  );
  release();
  const r = await training;
  assert.deepEqual(r.steps.map((s) => s.step), [0, 1, 2], "step indices");
  assert.deepEqual(r.steps.map((s) => s.loss), reference.losses.slice(0, 3), "nothing changed");
  assert.equal(m.stepCount, 3);

  // From onStep: the model stands between windows; the step count may not move.
  const lrs: number[] = [];
  const r2 = await m.train(batches.slice(3, 6), {
    window: 1,
    onStep: async (s) => {
      lrs.push(s.lr);
      if (s.step === 3) {
        await m.setLearningRate(0.5);
        await m.loadSafetensors(await m.saveSafetensors());
        await assert.rejects(m.loadCheckpoint(atZero), refused("loadCheckpoint", /after train/));
      }
    },
  });
  assert.deepEqual(r2.steps.map((s) => s.step), [3, 4, 5]);
  assert.deepEqual(lrs.slice(1), [0.5, 0.5], "the lr set from onStep holds for the next steps");
  // After train() resolves, everything is allowed again.
  assert.equal((await m.loadCheckpoint(atZero)).step, 0);
  assert.equal(m.stepCount, 0);
});
