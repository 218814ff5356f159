// A layer that returns an input gradient of the wrong shape is blamed where
// it ran: the rank, stage, action and layer that made it, not the rank that
// would have received it.

import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { FixedPartition } from "../../../src/pipeline/partition/partition.ts";
import { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { PipelineRankError } from "../../../src/pipeline/runtime/pipeline_rank_error.ts";
import { cpu } from "./_reference_training.ts";
import { WrongDx } from "./_wrong_dx_layer.ts";

const MODULE = new URL("./_wrong_dx_layer.ts", import.meta.url).href;

for (const rankGroup of ["in-process", "workers"] as const) {
  for (const schedule of ["1f1b", "zb-h1"] as const) {
    Deno.test(`a wrong-shaped dx from stage 1's first layer names rank 1 and the layer (${rankGroup}, ${schedule})`, async () => {
      const net = new Sequential([
        new Linear(cpu, 3, 6, { seed: 1 }),
        new WrongDx(cpu),
        new Linear(cpu, 6, 2, { seed: 2 }),
      ]);
      const model = await PipelineParallelModel.create({
        model: net,
        schedule,
        ranks: 2,
        microBatches: 2,
        optimizer: { kind: "sgd", lr: 0.1 },
        loss: "mse",
        backend: "cpu",
        rankGroup,
        partition: new FixedPartition([0, 1, 3]),
        inputShape: [1, 3],
        modules: [MODULE],
      });
      net.dispose();
      try {
        const error = await model.step({
          inputs: new Float32Array(12),
          shape: [4, 3],
          targets: new Float32Array(8),
        }).then(() => null, (e) => e as Error);
        assert.ok(error instanceof PipelineRankError, String(error));
        assert.equal(error.rank, 1, error.message);
        assert.match(
          error.message,
          /^rank 1 failed in 1[BI][01] \(stage 1, microBatch [01], iteration 0\): layer 1 \(TestWrongDx\), the first of stage 1, returned an input gradient of shape \[2, 7\], not its input's shape \[2, 6\]/,
        );
        assert.doesNotMatch(error.message, /fromData/);
      } finally {
        await model.dispose();
      }
    });
  }
}
