/**
 * Building a planned model's ranks: the stage options every rank gets, the
 * rank group (workers, this thread, or this process's one rank of an MPI
 * job) with one model stage executor per rank, and each rank's weights
 * loaded (under MPI each process loads its own rank's).
 *
 * @module
 */

import type { RankGroup } from "../runtime/rank_group.ts";
import { WorkerRankGroup } from "../runtime/worker_rank_group.ts";
import { InProcessRankGroup } from "../runtime/in_process_rank_group.ts";
import { SubprocessRankGroup } from "../runtime/subprocess_rank_group.ts";
import { SpmdRankGroup } from "../runtime/spmd_rank_group.ts";
import { processMpiComm } from "./_mpi_comm.ts";
import type { CheckedModelOptions } from "./options.ts";
import type { ModelPlan } from "./plan.ts";
import {
  createModelRankExecutor,
  MODEL_RANK_EXECUTOR_URL,
  type ModelStageOptions,
} from "./model_rank_executor.ts";
import type { ModelStageCalls } from "./stage_calls.ts";
import { tuneMatmulForRanks } from "./_matmul_tuning.ts";
import { chooseBackend } from "../../tensor/create_backend.ts";
import { callEveryRank } from "./_every_rank.ts";

/**
 * Starts the ranks of `plan` and loads their weights, then the training
 * checkpoint `resume` (already checked) if given; on any failure every
 * rank that started is released before the error is thrown.
 */
export async function buildRanks(
  o: CheckedModelOptions,
  plan: ModelPlan,
  resume?: Uint8Array,
): Promise<RankGroup<ModelStageCalls>> {
  // "auto" is decided here, once, and said once (every rank gets the same kind).
  const backend = (await chooseBackend(o.backend)).kind;
  // Tuned once here rather than in every worker at once (they have no cache).
  const tunedMatmul = await tuneMatmulForRanks(backend);
  const stageOptions: ModelStageOptions = {
    stageSpecs: plan.stageSpecs,
    ...(plan.tied.length === 0 ? {} : { tied: plan.tied }),
    backend,
    ...(tunedMatmul === undefined ? {} : { tunedMatmul }),
    loss: o.loss,
    optimizer: o.optimizer,
    ...(o.checkpoint === undefined ? {} : { checkpoint: o.checkpoint }),
    modules: o.modules,
    policy: o.policy,
  };
  let group: RankGroup<ModelStageCalls>;
  if (o.rankGroup === "mpi") {
    group = await SpmdRankGroup.create<ModelStageCalls>({
      schedule: plan.schedule,
      comm: o.comm ?? await processMpiComm(),
      createExecutor: createModelRankExecutor,
      executorOptions: stageOptions,
      // Every process must plan the same model: same stages, weights, training.
      settings: {
        layers: plan.stageSpecs,
        ...(resume === undefined ? { weights: plan.weights } : { resume }),
        optimizer: o.optimizer,
        loss: o.loss,
        checkpointing: o.checkpoint ?? null,
        // The policy fields that change the numbers (timeouts and faults may differ).
        clipGradNorm: o.policy.clipGradNorm ?? null,
        nonFinite: o.policy.nonFinite,
        ...o.sameOnEveryRank,
      },
      policy: o.policy,
      ...(o.dataParallel === 1 ? {} : { dataParallel: o.dataParallel }),
    });
  } else if (o.rankGroup !== "in-process") {
    if (o.dataParallel > 1 && o.rankGroup === "subprocess") {
      throw new TypeError(
        `dataParallel ${o.dataParallel} needs rankGroup "in-process", "workers" or "mpi"`,
      );
    }
    const create = o.rankGroup === "subprocess"
      ? SubprocessRankGroup.create<ModelStageCalls>
      : WorkerRankGroup.create<ModelStageCalls>;
    group = await create({
      schedule: plan.schedule,
      executor: { module: MODEL_RANK_EXECUTOR_URL, options: stageOptions },
      policy: o.policy,
      ...(o.dataParallel === 1 ? {} : { dataParallel: o.dataParallel }),
    });
  } else {
    group = await InProcessRankGroup.create<ModelStageCalls>({
      schedule: plan.schedule,
      createExecutor: createModelRankExecutor,
      executorOptions: stageOptions,
      policy: o.policy,
      ...(o.dataParallel === 1 ? {} : { dataParallel: o.dataParallel }),
    });
  }
  try {
    // Every replica's rank p loads pipeline rank p's weights.
    const P = plan.weights.length;
    await Promise.all(
      Array.from(
        { length: group.ranks },
        (_, r) => group.call(r, "load", { bytes: plan.weights[r % P] }),
      ),
    );
    if (resume !== undefined) await callEveryRank(group, "loadState", { bytes: resume });
  } catch (e) {
    await group.dispose().catch(() => {});
    throw e;
  }
  return group;
}
