import assert from "node:assert/strict";
import { EarlyStopping } from "../../../../src/pipeline/model/callbacks/early_stopping.ts";
import { cpuModel, tokenBatches } from "../_reference_training.ts";

const batches = tokenBatches(12, 8, 6);

Deno.test("EarlyStopping: with a validation loss that cannot improve (lr 0), train stops right after the evaluation that uses up the patience, whatever the window", async () => {
  for (const window of [1, 5, 12]) {
    await using m = await cpuModel({
      schedule: "zb-h1",
      microBatches: 4,
      optimizer: { kind: "sgd", lr: 0 },
    });
    const early = new EarlyStopping({ patience: 2 });
    const r = await m.train(batches, {
      window,
      validation: { batch: batches[0], every: 3 },
      callbacks: [early],
    });
    // Evaluations after steps 3 (the best), 6 (1), 9 (2: stop).
    assert.equal(r.steps.length, 9, `window ${window}`);
    assert.equal(m.stepCount, 9);
    assert.equal(
      r.stopped,
      `early stopping: the validation loss did not improve for 2 evaluations (best ${early.best} after step 3)`,
    );
    assert.equal(early.bestStep, 2);
  }
});

Deno.test("EarlyStopping: an improving accuracy (mode max) or loss keeps training; minDelta counts; no validation option is refused before any step", async () => {
  await using m = await cpuModel({
    schedule: "1f1b",
    microBatches: 4,
    optimizer: { kind: "adamw", lr: 2e-2 },
  });
  await assert.rejects(
    m.train(batches, { callbacks: [new EarlyStopping()] }),
    (e: Error) =>
      e instanceof TypeError &&
      /EarlyStopping watches the validation loss: give train a validation option/.test(e.message),
  );
  assert.equal(m.stepCount, 0);
  const r = await m.train(batches.slice(0, 6), {
    validation: { batch: batches[0], every: 2 },
    callbacks: [new EarlyStopping({ patience: 1 })],
  });
  assert.equal(r.stopped, undefined, "the training batch's own loss falls at every evaluation");
  const acc = new EarlyStopping({ metric: "accuracy", patience: 1, minDelta: 0.1 });
  assert.equal(acc.mode, "max");
  assert.deepEqual([acc.update(0.5, 0), acc.update(0.55, 1), acc.update(0.7, 2)], [
    false,
    true,
    false,
  ]);
  assert.throws(
    () => new EarlyStopping({ patience: 0 }),
    /patience must be a positive integer, got 0/,
  );
  assert.throws(
    () => new EarlyStopping({ metric: "f1" as never }),
    /metric must be "loss" or "accuracy"/,
  );
  assert.throws(() => new EarlyStopping({ minDelta: -1 }), /minDelta must be a finite number >= 0/);
});

Deno.test("EarlyStopping restoreBest: train ends with the weights of the best evaluation, not the last step's (they differ), whether stopped or not; without it the last weights stay", async () => {
  // SGD at lr 4 diverges after the first evaluation: its validation loss is the best.
  const validation = tokenBatches(1, 8, 99)[0];
  for (const [restoreBest, patience] of [[true, 2], [true, 10], [false, 2]] as const) {
    await using m = await cpuModel({
      schedule: "1f1b",
      microBatches: 4,
      optimizer: { kind: "sgd", lr: 4 },
    });
    const seen: { step: number; loss: number; weights: Uint8Array }[] = [];
    const early = new EarlyStopping({ patience, restoreBest });
    const r = await m.train(batches, {
      validation: { batch: validation, every: 2 },
      // After EarlyStopping saw the evaluation: the model stands at that step.
      callbacks: [early, {
        async onStepEnd(s, c) {
          if (c.validation === undefined) return;
          seen.push({ step: s.step, loss: c.validation.loss, weights: await m.saveSafetensors() });
        },
      }],
    });
    const what = `restoreBest ${restoreBest}, patience ${patience}`;
    assert.equal(r.stopped !== undefined, patience === 2, what);
    const best = seen.reduce((a, b) => (b.loss < a.loss ? b : a));
    const last = r.steps[r.steps.length - 1].step;
    assert.ok(best.step < last, `${what}: the test needs a best before the end: ${best.step}`);
    assert.equal(early.bestStep, best.step, what);
    const end = await m.saveSafetensors();
    if (restoreBest) {
      assert.equal(early.restoredStep, best.step, what);
      assert.deepEqual(end, best.weights, `${what}: the best evaluation's weights, bit for bit`);
      assert.equal((await m.evaluate(validation)).loss, best.loss, what);
    } else {
      assert.equal(early.restoredStep, -1);
      assert.deepEqual(end, seen[seen.length - 1].weights, what);
      assert.notDeepEqual(end, best.weights, what);
    }
    assert.equal(m.stepCount, last + 1, `${what}: the step count stays where training ended`);
  }
  assert.throws(
    () => new EarlyStopping({ restoreBest: "yes" as never }),
    /restoreBest must be a boolean, got "yes"/,
  );
  assert.throws(
    () => new EarlyStopping({ restoreBets: true } as never),
    /unknown option restoreBets: did you mean restoreBest\?/,
  );
});
