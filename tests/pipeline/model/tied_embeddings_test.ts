import assert from "node:assert/strict";
import { createTinyGPT } from "../../../src/nn/gpt.ts";
import { createOptimizer } from "../../../src/nn/optimizer_spec.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import { cpu, cpuModel, GPT, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { paramError, tensorsOf } from "./_compare.ts";

const TIED = { ...GPT, tieEmbeddings: true };
// SGD with momentum and weight decay: elementwise equal within 1e-5 relative
// (AdamW turns the rounding noise of zero gradients into ±lr steps: see
// pipeline_parallel_model_test.ts).
const SPEC: OptimizerSpec = { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 };
const SPEC_ADAMW: OptimizerSpec = { kind: "adamw", lr: 1e-3, weightDecay: 0 };
const batches = tokenBatches(4, 8, 11);

const CASES = [
  ["zb-v", 2, 4, "in-process"],
  ["dualpipe-v", 2, 4, "in-process"],
  ["1f1b", 2, 4, "in-process"],
  ["1f1b", 2, 4, "workers"],
  ["interleaved-1f1b", 2, 4, "in-process"],
] as const;

for (const [schedule, ranks, microBatches, rankGroup] of CASES) {
  Deno.test(`tied embeddings: ${schedule} on ${ranks} ranks (${rankGroup}) equals one device within 1e-5 relative at every step; the table is saved once`, async () => {
    const ref = createTinyGPT(TIED, cpu);
    const opt = createOptimizer(SPEC, ref.parameters());
    await using model = await cpuModel(
      {
        schedule,
        ranks,
        microBatches,
        optimizer: SPEC,
        rankGroup,
        ...(schedule === "interleaved-1f1b" ? { stagesPerRank: 2 } : {}),
      },
      () => createTinyGPT(TIED, cpu),
    );
    for (const [i, b] of batches.entries()) {
      const s = await model.step(b);
      const r = await referenceTraining(ref, opt, [b]);
      const got = tensorsOf(await model.saveSafetensors());
      assert.ok(![...got.keys()].some((k) => k.startsWith(`${ref.layers.length - 1}.`)));
      const e = paramError(got, r.tensors);
      assert.ok(e.worst < 1e-5, `step ${i}: worst ${e.worst} in ${e.worstName}`);
      assert.ok(Math.abs(s.loss - r.losses[0]) <= 1e-6 * r.losses[0], `step ${i}: loss ${s.loss}`);
    }
    opt.dispose();
    ref.dispose();
  });
}

Deno.test("tied embeddings across ranks with data parallelism (D = 2: 1f1b, and zb-v's one copy) and with global-norm clipping (a copy counts once in the norm): equal to one device; a checkpoint resumes on another schedule", async () => {
  const clip = 0.05;
  const ref = await referenceTraining(
    createTinyGPT(TIED, cpu),
    SPEC,
    batches,
    "cross-entropy",
    clip,
  );
  assert.ok(ref.gradNorms.some((n) => n > clip), `some step is clipped: ${ref.gradNorms}`);
  const plain = await referenceTraining(createTinyGPT(TIED, cpu), SPEC, batches);
  for (
    const [options, want] of [
      [{ dataParallel: 2 }, plain],
      [{ clipGradNorm: clip }, ref],
      [{ dataParallel: 2, clipGradNorm: clip }, ref],
      [{ dataParallel: 2, schedule: "zb-v" }, plain],
    ] as const
  ) {
    await using model = await cpuModel(
      { schedule: "1f1b", microBatches: 4, optimizer: SPEC, ...options },
      () => createTinyGPT(TIED, cpu),
    );
    const r = await model.train(batches);
    const e = paramError(tensorsOf(await model.saveSafetensors()), want.tensors);
    assert.ok(e.worst < 1e-5, `${JSON.stringify(options)}: worst ${e.worst} in ${e.worstName}`);
    r.steps.forEach((s, i) =>
      assert.ok(Math.abs(s.loss - want.losses[i]) <= 1e-6 * want.losses[i], `step ${i}`)
    );
  }
  // Two steps on 1f1b, a checkpoint, two more on zb-v: as four on one device.
  const bytes = await (async () => {
    await using a = await cpuModel(
      { schedule: "1f1b", microBatches: 4, optimizer: SPEC },
      () => createTinyGPT(TIED, cpu),
    );
    await a.train(batches.slice(0, 2));
    return await a.checkpointBytes();
  })();
  await using b = await cpuModel(
    { schedule: "zb-v", microBatches: 4, optimizer: SPEC, resume: bytes },
    () => createTinyGPT(TIED, cpu),
  );
  await b.train(batches.slice(2));
  const e = paramError(tensorsOf(await b.saveSafetensors()), plain.tensors);
  assert.ok(e.worst < 1e-5, `resumed: worst ${e.worst} in ${e.worstName}`);
});

Deno.test("adviseSchedule with tied embeddings: the rank holding the head's copy counts the table, its gradient and optimizer state (1f1b), none where one rank holds both (zb-v); the prediction matches the ranks' live bytes", async () => {
  const { adviseSchedule } = await import("../../../src/advise/advise.ts");
  const net = createTinyGPT(TIED, cpu);
  const b = batches[0];
  const advice = await adviseSchedule(net, b, {
    loss: "cross-entropy",
    schedules: ["1f1b", "zb-v"],
    ranks: 2,
    microBatches: 4,
    optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
    nonFinite: "off",
    repeats: 1,
    warmup: 0,
    verify: 0,
    calibrate: false,
  });
  const table = 4 * TIED.vocabSize * TIED.dim;
  for (const c of advice.candidates) {
    const stageBytes = (s: number) => {
      let n = 0;
      for (let i = c.boundaries[s]; i < c.boundaries[s + 1]; i++) {
        for (const p of net.layers[i].parameters()) n += p.value.bytes;
      }
      return n;
    };
    const where = c.generated!.stageToRank;
    const want = [0, 0];
    where.forEach((r, s) => want[r] += stageBytes(s));
    if (c.schedule === "1f1b") want[1] += table; // the head's copy
    assert.deepEqual(c.memory.map((m) => m.parameters), want, c.schedule);
    assert.deepEqual(c.memory.map((m) => m.optimizerState), want.map((x) => 2 * x), c.schedule);
    // Between steps a rank holds its parameters, gradients and AdamW's moments.
    await using model = await cpuModel(
      {
        schedule: c.schedule as "1f1b" | "zb-v",
        microBatches: 4,
        optimizer: SPEC_ADAMW,
        nonFinite: "off",
      },
      () => createTinyGPT(TIED, cpu),
    );
    await model.step(b);
    const live = (await model.rankInfo()).map((r) => r.liveBytes);
    c.memory.forEach((m, r) => {
      const held = m.parameters + m.gradients + m.optimizerState;
      assert.ok(
        Math.abs(live[r] - held) <= 0.02 * held,
        `${c.schedule} rank ${r}: ${live[r]} vs ${held}`,
      );
    });
  }
  net.dispose();
});

Deno.test("tied embeddings across ranks and a non-finite step: a NaN in the head's gradient (on the copy's rank) rolls the step back on both ranks, bit for bit as training without that batch", async () => {
  const { NanAt } = await import("./_nan_layer.ts");
  const { parseSafetensors } = await import("../../../src/nn/safetensors.ts");
  const { Sequential } = await import("../../../src/nn/sequential.ts");
  const NAN_MODULE = new URL("./_nan_layer.ts", import.meta.url).href;
  const withNan = (step: number) => {
    const g = createTinyGPT(TIED, cpu);
    const head = g.layers[g.layers.length - 1];
    return new Sequential([
      ...g.layers.slice(0, -1),
      new NanAt(cpu, { step, row: 2, pass: "backward" }),
      head,
    ]);
  };
  const build = (step: number) =>
    cpuModel(
      { schedule: "1f1b", microBatches: 4, optimizer: SPEC_ADAMW, modules: [NAN_MODULE] },
      () => withNan(step),
    );
  const state = async (m: Awaited<ReturnType<typeof build>>) =>
    new Map([...parseSafetensors(await m.checkpointBytes()).tensors].map(([k, e]) => [k, e.data]));
  await using ref = await build(-1);
  await ref.train([batches[0]]);
  await ref.train([batches[2]]);
  const want = await state(ref);
  await using m = await build(1);
  const r = await m.train(batches.slice(0, 3));
  assert.deepEqual(r.steps.map((s) => s.skipped === true), [false, true, false]);
  const got = await state(m);
  assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort());
  for (const [k, v] of want) assert.deepEqual(got.get(k), v, k);
});
