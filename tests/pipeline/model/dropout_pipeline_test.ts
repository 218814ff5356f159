// Dropout across pipeline ranks drops the same elements as single-device
// training: its mask depends on the seed, the step and each element's row in
// the full batch, never on the micro-batch split, the rank or a recompute.

import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { GELU } from "../../../src/nn/gelu.ts";
import { Dropout } from "../../../src/nn/dropout.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Rng } from "../../../src/tensor/random.ts";
import { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { cpu, referenceTraining } from "./_reference_training.ts";
import { paramError, tensorsOf } from "./_compare.ts";

function net(): Sequential {
  return new Sequential([
    new Linear(cpu, 4, 16, { seed: 1 }),
    new GELU(cpu),
    new Dropout(cpu, 0.3, { seed: 11 }),
    new Linear(cpu, 16, 16, { seed: 2 }),
    new GELU(cpu),
    new Dropout(cpu, 0.5, { seed: 12 }),
    new Linear(cpu, 16, 2, { seed: 3 }),
  ]);
}

const rng = new Rng(5);
const batches = Array.from({ length: 3 }, () => {
  const inputs = new Float32Array(12 * 4).map(() => rng.next() * 2 - 1);
  const targets = new Float32Array(12 * 2).map(() => rng.next());
  return { inputs, shape: [12, 4], targets };
});

for (
  const [name, ranks, rankGroup, checkpoint] of [
    ["zb-h1", 2, "in-process", false],
    ["interleaved-1f1b", 2, "in-process", true],
    ["zb-v", 2, "workers", true],
  ] as const
) {
  Deno.test(`Dropout in a pipeline (${name}, P = ${ranks}, ${rankGroup}${checkpoint ? ", checkpointed" : ""}) equals single-device training`, async () => {
    const single = net();
    const want = await referenceTraining(single, { kind: "sgd", lr: 0.1 }, batches, "mse");
    single.dispose();
    const model = net();
    const pipe = await PipelineParallelModel.create({
      model,
      schedule: name,
      ranks,
      microBatches: 4,
      optimizer: { kind: "sgd", lr: 0.1 },
      loss: "mse",
      backend: "cpu",
      rankGroup,
      inputShape: [1, 4],
      ...(checkpoint ? { checkpoint: { enabled: true, everyNLayers: 2 } } : {}),
    });
    model.dispose();
    try {
      const r = await pipe.train(batches);
      r.steps.forEach((s, i) =>
        assert.ok(Math.abs(s.loss - want.losses[i]) <= 1e-5 * Math.abs(want.losses[i]), `loss ${i}`)
      );
      const err = paramError(tensorsOf(await pipe.saveSafetensors()), want.tensors);
      assert.ok(err.worst <= 1e-5, `worst ${err.worst} at ${err.worstName}`);
      // Prediction never drops: two predictions agree.
      const x = { inputs: batches[0].inputs, shape: [12, 4] };
      assert.deepEqual((await pipe.predict(x)).data, (await pipe.predict(x)).data);
    } finally {
      await pipe.dispose();
    }
    assert.equal(liveWorkers(), 0);
  });
}
