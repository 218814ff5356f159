import assert from "node:assert/strict";
import { createTinyGPT } from "../../../src/nn/gpt.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import { cpu, cpuModel, GPT, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { paramError, tensorsOf } from "./_compare.ts";

const TIED = { ...GPT, tieEmbeddings: true };
// SGD with momentum and weight decay: elementwise equal within 1e-5 relative
// (AdamW turns the rounding noise of zero gradients into ±lr steps: see
// pipeline_parallel_model_test.ts).
const SPEC: OptimizerSpec = { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 };
const batches = tokenBatches(4, 8, 11);

for (const [schedule, ranks, microBatches] of [["zb-v", 2, 4], ["dualpipe-v", 2, 4]] as const) {
  Deno.test(`tied embeddings: ${schedule} on ${ranks} ranks (first and last stage on rank 0, one copy) equals one device within 1e-5 relative at every step`, async () => {
    const ref2 = createTinyGPT(TIED, cpu);
    const { createOptimizer } = await import("../../../src/nn/optimizer_spec.ts");
    const opt = createOptimizer(SPEC, ref2.parameters());
    await using model = await cpuModel(
      { schedule, ranks, microBatches, optimizer: SPEC },
      () => createTinyGPT(TIED, cpu),
    );
    const info = await model.rankInfo();
    assert.deepEqual(info[0].stages, [0, 2 * ranks - 1]);
    for (const [i, b] of batches.entries()) {
      const r = await referenceTraining(ref2, opt, [b]);
      const s = await model.step(b);
      const got = tensorsOf(await model.saveSafetensors());
      assert.ok(!got.has(`${ref2.layers.length - 1}.weight`));
      const e = paramError(got, r.tensors);
      assert.ok(e.worst < 1e-5, `step ${i}: worst ${e.worst} in ${e.worstName}`);
      assert.ok(Math.abs(s.loss - r.losses[0]) <= 1e-6 * r.losses[0], `step ${i}: loss ${s.loss}`);
    }
    opt.dispose();
    ref2.dispose();
  });
}

Deno.test("tied embeddings: a schedule that puts the head and the table on two ranks is refused before any rank starts, naming both and the way out", async () => {
  await assert.rejects(
    () =>
      cpuModel(
        { schedule: "1f1b", microBatches: 2, optimizer: SPEC },
        () => createTinyGPT(TIED, cpu),
      ),
    (e: Error) =>
      e instanceof RangeError &&
      /head \(layer 7, stage 1\) is on rank 1 but 0\.token \(stage 0\) on rank 0 under "1f1b"/.test(
        e.message,
      ) &&
      e.message.includes('"zb-v"'),
  );
});
