import assert from "node:assert/strict";
import {
  METRICS_CSV_HEADER,
  MetricsLogger,
} from "../../../../src/pipeline/model/callbacks/metrics_logger.ts";
import { cpuModel, tokenBatches } from "../_reference_training.ts";

const batches = tokenBatches(6, 8, 4);
const held = tokenBatches(1, 8, 40)[0];
const build = () =>
  cpuModel({ schedule: "zb-h1", microBatches: 4, optimizer: { kind: "adamw", lr: 1e-2 } });

Deno.test("MetricsLogger (JSON Lines): one line per step with the step's result (steps counted from 1) and the validation at validation steps; append continues a resumed run's log", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await build();
    const path = `${dir}/m.jsonl`;
    const r1 = await m.train(batches.slice(0, 4), {
      validation: { batch: held, every: 2 },
      callbacks: [new MetricsLogger(path)],
    });
    const r2 = await m.train(batches.slice(4), {
      validation: { batch: held, every: 2 },
      callbacks: [new MetricsLogger(new URL(`file://${path}`), { append: true })],
    });
    const lines = (await Deno.readTextFile(path)).trimEnd().split("\n").map((l) => JSON.parse(l));
    const steps = [...r1.steps, ...r2.steps];
    assert.equal(lines.length, 6);
    for (const [i, line] of lines.entries()) {
      const s = steps[i];
      const { wallMs, validationLoss, validationAccuracy, ...rest } = line;
      assert.deepEqual(rest, {
        step: s.step + 1,
        loss: s.loss,
        lr: s.lr,
        makespanMs: s.makespanMs,
        bubble: s.bubble,
      });
      assert.ok(Number.isInteger(wallMs) && wallMs >= 0);
      assert.equal(validationLoss !== undefined, (s.step + 1) % 2 === 0, `line ${i}`);
      assert.equal(validationAccuracy !== undefined, (s.step + 1) % 2 === 0);
    }
    // The validation values are the model's at those steps.
    await using again = await build();
    const want: number[] = [];
    for (const b of batches) {
      await again.train([b]);
      if (again.stepCount % 2 === 0) want.push((await again.evaluate(held)).loss);
    }
    assert.deepEqual(lines.filter((l) => "validationLoss" in l).map((l) => l.validationLoss), want);
    // Without append the file starts afresh.
    await m.train(batches.slice(0, 1), { callbacks: [new MetricsLogger(path)] });
    assert.equal((await Deno.readTextFile(path)).trimEnd().split("\n").length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("MetricsLogger (CSV): the header once, empty cells for absent fields; appending to a file with another header is refused before any step", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await build();
    const path = `${dir}/m.csv`;
    const r = await m.train(batches.slice(0, 2), { callbacks: [new MetricsLogger(path)] });
    await m.train(batches.slice(2, 3), { callbacks: [new MetricsLogger(path, { append: true })] });
    const rows = (await Deno.readTextFile(path)).trimEnd().split("\n");
    assert.equal(rows[0], METRICS_CSV_HEADER);
    assert.equal(rows.length, 4);
    const cells = rows[1].split(",");
    assert.equal(cells.length, 10);
    assert.deepEqual(cells.slice(0, 9), [
      "1",
      String(r.steps[0].loss),
      String(r.steps[0].lr),
      String(r.steps[0].makespanMs),
      String(r.steps[0].bubble),
      "",
      "",
      "",
      "",
    ]);
    assert.equal(rows[3].split(",")[0], "3");
    await Deno.writeTextFile(`${dir}/other.csv`, "a,b\n1,2\n");
    await assert.rejects(
      m.train(batches.slice(3, 4), {
        callbacks: [new MetricsLogger(`${dir}/other.csv`, { append: true })],
      }),
      /MetricsLogger: path .*other\.csv: its header "a,b" is not "step,loss,/,
    );
    assert.equal(m.stepCount, 3, "no step ran");
    assert.equal(await Deno.readTextFile(`${dir}/other.csv`), "a,b\n1,2\n", "left as it was");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("MetricsLogger: its path is checked before the first step (missing folder, a directory); under MPI ranks other than 0 write nothing", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await build();
    let pulled = 0;
    const source = function* () {
      for (const b of batches) {
        pulled++;
        yield b;
      }
    };
    await assert.rejects(
      m.train(source(), { callbacks: [new MetricsLogger(`${dir}/no/m.jsonl`)] }),
      (e: Error) =>
        e instanceof TypeError &&
        e.message ===
          `MetricsLogger: path ${dir}/no/m.jsonl: the folder ${dir}/no does not exist (create it first)`,
    );
    await assert.rejects(
      m.train(source(), { callbacks: [new MetricsLogger(dir)] }),
      (e: Error) =>
        e instanceof TypeError &&
        e.message === `MetricsLogger: path ${dir}: it is a directory: name a file to write`,
    );
    assert.deepEqual([pulled, m.stepCount], [0, 0]);
    const quiet = new MetricsLogger(`${dir}/rank1.jsonl`);
    quiet.onTrainBegin({ firstStep: 0, localRank: 1 });
    quiet.onStepEnd({ step: 0, loss: 1 } as never, { exact: true, stop: () => {} });
    await assert.rejects(Deno.stat(`${dir}/rank1.jsonl`), Deno.errors.NotFound);
    assert.throws(
      () => new MetricsLogger(`${dir}/x`, { format: "xml" as never }),
      /format must be "jsonl" or "csv"/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("MetricsLogger append: the lines of steps after the one training resumes from (an interrupted run logged past its checkpoint) and a torn last line are dropped, so the log reads as one run; a run from step 0 keeps the lines", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const step = (i: number) =>
      ({ step: i, loss: 1 / (i + 1), lr: 0.01, makespanMs: 5, bubble: 0.1 }) as never;
    const ctx = { exact: true, stop: () => {} };
    for (const format of ["jsonl", "csv"] as const) {
      const path = `${dir}/m.${format}`;
      // An interrupted run: steps 1..5 logged, the checkpoint at step 3, a torn sixth line.
      const first = new MetricsLogger(path);
      first.onTrainBegin({ firstStep: 0, localRank: null });
      for (let i = 0; i < 5; i++) first.onStepEnd(step(i), ctx);
      await Deno.writeTextFile(path, format === "jsonl" ? '{"step":6,"lo' : "6,0.1", {
        append: true,
      });
      // The resumed run starts at step index 3 (its first line is step 4).
      const resumed = new MetricsLogger(path, { append: true });
      resumed.onTrainBegin({ firstStep: 3, localRank: null });
      for (let i = 3; i < 6; i++) resumed.onStepEnd(step(i), ctx);
      const lines = (await Deno.readTextFile(path)).split("\n").filter((l) => l !== "");
      const steps = format === "jsonl"
        ? lines.map((l) => JSON.parse(l).step)
        : lines.slice(1).map((l) => Number(l.split(",")[0]));
      assert.deepEqual(steps, [1, 2, 3, 4, 5, 6], `${format}: ${lines.join(" | ")}`);
      if (format === "csv") assert.equal(lines[0], METRICS_CSV_HEADER);
      // A fresh model (step 0) appending keeps every line (another run's log), not a torn one.
      await Deno.writeTextFile(path, format === "jsonl" ? '{"step":7,"lo' : "7,0.1", {
        append: true,
      });
      const fresh = new MetricsLogger(path, { append: true });
      fresh.onTrainBegin({ firstStep: 0, localRank: null });
      fresh.onStepEnd(step(0), ctx);
      const again = (await Deno.readTextFile(path)).split("\n").filter((l) => l !== "");
      const stepsAgain = format === "jsonl"
        ? again.map((l) => JSON.parse(l).step)
        : again.slice(1).map((l) => Number(l.split(",")[0]));
      assert.deepEqual(stepsAgain, [1, 2, 3, 4, 5, 6, 1], `${format}: ${again.join(" | ")}`);
    }
    // A CSV log torn right after its header keeps the header.
    const path = `${dir}/torn.csv`;
    await Deno.writeTextFile(path, METRICS_CSV_HEADER);
    const resumed = new MetricsLogger(path, { append: true });
    resumed.onTrainBegin({ firstStep: 3, localRank: null });
    resumed.onStepEnd(step(3), ctx);
    const lines = (await Deno.readTextFile(path)).split("\n");
    assert.equal(lines[0], METRICS_CSV_HEADER);
    assert.equal(lines[1].split(",")[0], "4");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
