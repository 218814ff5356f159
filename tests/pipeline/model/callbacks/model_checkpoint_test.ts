import assert from "node:assert/strict";
import { Rng } from "../../../../src/tensor/random.ts";
import { ModelCheckpoint } from "../../../../src/pipeline/model/callbacks/model_checkpoint.ts";
import type { TrainingBatch } from "../../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpuModel, tokenBatches } from "../_reference_training.ts";

const pool = tokenBatches(16, 8, 8);
const spec = { kind: "adamw" as const, lr: 1e-2 };
const build = (resume?: string) =>
  cpuModel({ schedule: "zb-h1", microBatches: 4, optimizer: spec, ...(resume ? { resume } : {}) });

// A source whose order depends on an Rng: the state a checkpoint must hold.
async function* draw(rng: Rng, n: number): AsyncGenerator<TrainingBatch> {
  for (let i = 0; i < n; i++) {
    await new Promise((r) => setTimeout(r, 1));
    yield pool[rng.int(pool.length)];
  }
}

Deno.test("ModelCheckpoint: a file every N steps ({step} in the path), each resuming bit for bit with an async source, in the default window", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const whole = await (async () => {
      await using m = await build();
      const r = await m.train(draw(new Rng(3), 10));
      return { losses: r.steps.map((s) => s.loss), bytes: await m.checkpointBytes() };
    })();
    {
      await using m = await build();
      const rng = new Rng(3);
      await m.train(draw(rng, 10), {
        callbacks: [
          new ModelCheckpoint(m, {
            path: `${dir}/ck-{step}.safetensors`,
            every: 3,
            data: () => ({ rng: JSON.stringify(rng.state()) }),
          }),
        ],
      });
    }
    const files = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assert.deepEqual(files, ["ck-3.safetensors", "ck-6.safetensors", "ck-9.safetensors"]);
    for (const at of [3, 6, 9]) {
      await using m = await build(`${dir}/ck-${at}.safetensors`);
      assert.equal(m.stepCount, at);
      const rng = Rng.fromState(JSON.parse(m.resumedFrom!.data.rng));
      const r = await m.train(draw(rng, 10 - at));
      assert.deepEqual(r.steps.map((s) => s.loss), whole.losses.slice(at), `from ${at}`);
      assert.deepEqual(await m.checkpointBytes(), whole.bytes, `from ${at}: bit for bit`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ModelCheckpoint: the path checked before the first step; bad options refused", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await build();
    const bad = new ModelCheckpoint(m, { path: `${dir}/gone/ck.safetensors`, every: 2 });
    await assert.rejects(
      m.train(pool.slice(0, 4), { callbacks: [bad] }),
      (e: Error) =>
        e instanceof TypeError &&
        /^ModelCheckpoint: path .*gone\/ck\.safetensors: the folder .*gone does not exist/.test(
          e.message,
        ),
    );
    assert.equal(m.stepCount, 0);
    await assert.rejects(
      m.train(pool.slice(0, 4), { callbacks: [new ModelCheckpoint(m, { path: dir, every: 2 })] }),
      /is a directory/,
    );
    assert.throws(
      () => new ModelCheckpoint(m, { path: "x", every: 0 }),
      /every must be a positive integer, got 0/,
    );
    assert.throws(
      () => new ModelCheckpoint({} as never, { path: "x", every: 1 }),
      /saveCheckpoint method/,
    );
    assert.throws(
      () => new ModelCheckpoint(m, { path: new URL("https://x/y"), every: 1 }),
      TypeError,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ModelCheckpoint: a placeholder other than {step} is refused when built, naming it ({epoch}: the model counts steps; {stpe}: did you mean step?), not written as a file of that name", () => {
  const model = { saveCheckpoint: async () => {} };
  assert.throws(
    () => new ModelCheckpoint(model, { path: "ck-{epoch}.safetensors", every: 1 }),
    (e: Error) =>
      e instanceof TypeError &&
      e.message ===
        'ModelCheckpoint: path "ck-{epoch}.safetensors" holds the placeholder {epoch}, which it ' +
          "does not know: {step} (the step count) is the only one (the model counts steps, not epochs)",
  );
  assert.throws(
    () => new ModelCheckpoint(model, { path: "out/{stpe}.safetensors", every: 1 }),
    /placeholder \{stpe\}, which it does not know: \{step\} \(the step count\) is the only one; did you mean step\?/,
  );
  assert.throws(
    () => new ModelCheckpoint(model, { path: "{step}-{rank}.safetensors", every: 1 }),
    /placeholder \{rank\}/,
  );
  const ok = new ModelCheckpoint(model, { path: "a{b/ck-{step}.safetensors", every: 2 });
  assert.equal(ok.pathAt(4), "a{b/ck-4.safetensors");
});
