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
import { tuneMatmulForRanks } from "./matmul_tuning.ts";
import { chooseBackend } from "../../tensor/create_backend.ts";
import { callEveryRank } from "./_every_rank.ts";
import { threadsPerRank } from "../../tensor/cpu/backend_options.ts";
import { WASM_MEMORY_LIMIT } from "../../tensor/cpu/wasm_memory_limit.ts";

/**
 * Refuses, before any rank starts, a plan whose rank holds more parameter
 * state than a CPU rank's memory can: each CPU rank keeps its tensors in one
 * WebAssembly memory of at most 4 GiB (parameters, their gradients, the
 * optimizer's state, and the step check's copies of both), activations
 * still to come.
 */
export function checkCpuMemory(
  o: Pick<CheckedModelOptions, "optimizer" | "policy">,
  plan: Pick<ModelPlan, "weights">,
): void {
  const states = o.optimizer.kind === "adamw" ? 2 : (o.optimizer.momentum ?? 0) > 0 ? 1 : 0;
  const copies = 2 + states + (o.policy.nonFinite === "off" ? 0 : 1 + states);
  plan.weights.forEach((w, r) => {
    const bytes = w.byteLength * copies;
    if (bytes > WASM_MEMORY_LIMIT) {
      throw new RangeError(
        `rank ${r}'s parameters need ${(bytes / 2 ** 30).toFixed(1)} GiB with their gradients ` +
          `and optimizer state (${copies} copies of ${(w.byteLength / 2 ** 30).toFixed(2)} GiB), ` +
          `more than the 4 GiB a CPU rank's memory holds (one WebAssembly memory): use more ` +
          `ranks, so that each holds fewer layers`,
      );
    }
  });
}

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
  // Under MPI every process runs this: each says its choice with its rank.
  const comm = o.rankGroup === "mpi" ? o.comm ?? await processMpiComm() : undefined;
  // "auto" is decided here, once, and said once (every rank gets the same kind).
  const backend = (await chooseBackend(o.backend, comm === undefined ? {} : { rank: comm.rank }))
    .kind;
  if (backend === "cpu") checkCpuMemory(o, plan);
  // Tuned once here rather than in every worker at once (they have no cache).
  const tunedMatmul = await tuneMatmulForRanks(backend);
  const stageOptions: ModelStageOptions = {
    stageSpecs: plan.stageSpecs,
    ...(plan.tied.length === 0 ? {} : { tied: plan.tied }),
    backend,
    // Under MPI the job's ranks are taken to share one host.
    threads: o.threads ?? threadsPerRank(plan.schedule.ranks * o.dataParallel),
    ...(tunedMatmul === undefined ? {} : { tunedMatmul }),
    loss: o.loss,
    optimizer: o.optimizer,
    ...(o.checkpoint === undefined ? {} : { checkpoint: o.checkpoint }),
    modules: o.modules,
    policy: o.policy,
  };
  // ZeRO-1: each global rank k·P + p learns its replica k (its optimizer's share).
  const P = plan.schedule.ranks;
  const executorOptions = o.shardOptimizer
    ? (g: number): ModelStageOptions => ({
      ...stageOptions,
      shard: { replica: Math.floor(g / P), replicas: o.dataParallel },
    })
    : stageOptions;
  const shard = o.shardOptimizer ? { shardOptimizer: true } : {};
  let group: RankGroup<ModelStageCalls>;
  if (o.rankGroup === "mpi") {
    group = await SpmdRankGroup.create<ModelStageCalls>({
      schedule: plan.schedule,
      comm: comm ?? await processMpiComm(),
      createExecutor: createModelRankExecutor,
      executorOptions,
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
        shardOptimizer: o.shardOptimizer,
        ...o.sameOnEveryRank,
      },
      policy: o.policy,
      ...(o.dataParallel === 1 ? {} : { dataParallel: o.dataParallel }),
      ...shard,
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
      executor: { module: MODEL_RANK_EXECUTOR_URL, options: executorOptions },
      policy: o.policy,
      ...(o.dataParallel === 1 ? {} : { dataParallel: o.dataParallel }),
      ...shard,
    });
  } else {
    group = await InProcessRankGroup.create<ModelStageCalls>({
      schedule: plan.schedule,
      createExecutor: createModelRankExecutor,
      executorOptions,
      policy: o.policy,
      ...(o.dataParallel === 1 ? {} : { dataParallel: o.dataParallel }),
      ...shard,
    });
  }
  try {
    // Every replica's rank p loads pipeline rank p's weights.
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
