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
import { MpiRankGroup } from "../runtime/mpi_rank_group.ts";
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

/** Timeouts of the worker ranks (ms; absent: the group's defaults). */
export interface RankTimeouts {
  readonly heartbeatMs?: number;
  readonly stallTimeoutMs?: number;
}

/**
 * Starts the ranks of `plan` and loads their weights, then the training
 * checkpoint `resume` (already checked) if given; on any failure every
 * rank that started is released before the error is thrown.
 */
export async function buildRanks(
  o: CheckedModelOptions,
  plan: ModelPlan,
  timeouts: RankTimeouts,
  resume?: Uint8Array,
): Promise<RankGroup<ModelStageCalls>> {
  // "auto" is decided here, once, and said once (every rank gets the same kind).
  const backend = (await chooseBackend(o.backend)).kind;
  // Tuned once here rather than in every worker at once (they have no cache).
  const tunedMatmul = await tuneMatmulForRanks(backend);
  const stageOptions: ModelStageOptions = {
    chunks: plan.chunks,
    backend,
    ...(tunedMatmul === undefined ? {} : { tunedMatmul }),
    loss: o.loss,
    optimizer: o.optimizer,
    ...(o.checkpoint === undefined ? {} : { checkpoint: o.checkpoint }),
    ...(o.clipGradNorm === undefined ? {} : { clipGradNorm: o.clipGradNorm }),
    modules: o.modules,
    checkSteps: o.nonFinite === "off" ? "off" : "on",
  };
  const fault = {
    ...(o.faultInjection === undefined ? {} : { fault: o.faultInjection }),
    validateSteps: o.nonFinite === "skip"
      ? "skip" as const
      : o.nonFinite === "throw"
      ? "stop" as const
      : "off" as const,
    ...(o.clipGradNorm === undefined ? {} : { clipNorm: o.clipGradNorm }),
  };
  let group: RankGroup<ModelStageCalls>;
  if (o.rankGroup === "mpi") {
    group = await MpiRankGroup.create<ModelStageCalls>({
      schedule: plan.schedule,
      comm: o.comm ?? await processMpiComm(),
      createExecutor: createModelRankExecutor,
      executorOptions: stageOptions,
      // Every process must plan the same model: same chunks, weights, training.
      settings: {
        layers: plan.chunks,
        ...(resume === undefined ? { weights: plan.weights } : { resume }),
        optimizer: o.optimizer,
        loss: o.loss,
        checkpointing: o.checkpoint ?? null,
        clipGradNorm: o.clipGradNorm ?? null,
        nonFinite: o.nonFinite,
        ...o.sameOnEveryRank,
      },
      ...fault,
    });
  } else if (o.rankGroup !== "in-process") {
    const hb = timeouts.heartbeatMs;
    const create = o.rankGroup === "subprocess"
      ? SubprocessRankGroup.create<ModelStageCalls>
      : WorkerRankGroup.create<ModelStageCalls>;
    group = await create({
      schedule: plan.schedule,
      executor: { module: MODEL_RANK_EXECUTOR_URL, options: stageOptions },
      ...(hb === undefined
        ? {}
        : { heartbeatTimeoutMs: hb, heartbeatIntervalMs: Math.max(5, Math.min(200, hb / 4)) }),
      ...(timeouts.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: timeouts.stallTimeoutMs }),
      ...fault,
    });
  } else {
    group = await InProcessRankGroup.create<ModelStageCalls>({
      schedule: plan.schedule,
      createExecutor: createModelRankExecutor,
      executorOptions: stageOptions,
      ...fault,
    });
  }
  try {
    await Promise.all(plan.weights.map((bytes, r) => group.call(r, "load", { bytes })));
    if (resume !== undefined) await callEveryRank(group, "loadState", { bytes: resume });
  } catch (e) {
    await group.dispose().catch(() => {});
    throw e;
  }
  return group;
}
