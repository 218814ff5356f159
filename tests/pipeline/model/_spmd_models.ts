// `n` models with rankGroup "mpi" over an in-process transport, one per
// simulated process (global rank r on comm r), created concurrently, as n
// copies of one script under mpirun would: the tiny GPT, SGD, the CPU
// backend and 1F1B unless `options` says otherwise (`ranks` defaults to n).
// Shared by spmd_model_test.ts and spmd_data_parallel_test.ts.

import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { gpt } from "./_reference_training.ts";

/** The optimizer of the SPMD tests. */
export const SPMD_SGD: OptimizerSpec = { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 };

/** Builds the n models (see the file's comment); the caller disposes models and comms. */
export async function spmdModels(
  n: number,
  microBatches: number,
  options: Partial<PipelineParallelModelOptions> = {},
): Promise<{ models: PipelineParallelModel[]; comms: InProcessBackend[] }> {
  const comms = InProcessBackend.createGroup(n);
  const nets = comms.map(() => gpt());
  try {
    const models = await Promise.all(comms.map((comm, r) =>
      PipelineParallelModel.create({
        model: nets[r],
        schedule: "1f1b",
        ranks: n,
        microBatches,
        optimizer: SPMD_SGD,
        loss: "cross-entropy",
        backend: "cpu",
        rankGroup: "mpi",
        comm,
        ...options,
      })
    ));
    return { models, comms };
  } finally {
    for (const net of nets) net.dispose();
  }
}
