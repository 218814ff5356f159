/**
 * The options of `PipelineParallelModel.create` and their checks, run
 * before any rank starts.
 *
 * @module
 */

import type { Shape } from "../../tensor/mod.ts";
import type { BackendKind } from "../../tensor/create_backend.ts";
import { Sequential } from "../../nn/sequential.ts";
import { checkOptimizerSpec, type OptimizerSpec } from "../../nn/optimizer_spec.ts";
import type { Schedule } from "../schedule/schedule.ts";
import type { PartitionStrategy } from "../partition/partition.ts";
import type { CostSource } from "../partition/layer_costs.ts";
import {
  ActivationCheckpointConfig,
  type ActivationCheckpointOptions,
} from "../checkpoint/checkpoint.ts";
import { checkFaultInjection, type FaultInjection } from "../runtime/fault_injection.ts";
import type { RankGroupKind } from "../runtime/rank_group.ts";
import type { CommBackend } from "../comm/backend.ts";
import { checkRankGroup } from "./_rank_group_choice.ts";
import type { PipelineLoss } from "./model_stage_executor.ts";

/** Options of `PipelineParallelModel.create`. */
export interface PipelineParallelModelOptions {
  /** The model; its weights are copied at creation (it is not changed or kept in sync). */
  readonly model: Sequential;
  /** A schedule name (built with `ranks`, `microBatches`, `stagesPerRank`) or a schedule. */
  readonly schedule: string | Schedule;
  /** Pipeline ranks p (with a schedule name; must match a given schedule). */
  readonly ranks?: number;
  /** Micro-batches per step m (with a schedule name; must match a given schedule). */
  readonly microBatches?: number;
  /** Chunks per rank V (with a schedule name; default the schedule's own). */
  readonly stagesPerRank?: number;
  /** How the layers are cut into p·V chunks (default `LoadBalancedPartition` on `partitionCosts`). */
  readonly partition?: PartitionStrategy;
  /** Cost of each layer for the partition (default `"flops"`). */
  readonly partitionCosts?: CostSource;
  /**
   * Input shape used for the FLOPs costs; default inferred from the first
   * layer (an embedding: `[1, maxLen]` or `[1, 1]`, a Linear `[1, in]`, …).
   */
  readonly inputShape?: Shape;
  /** Activation checkpointing of every chunk (default none). */
  readonly checkpoint?: ActivationCheckpointConfig | ActivationCheckpointOptions;
  /** Optimizer of every stage, stepped right after that stage's last backward. */
  readonly optimizer: OptimizerSpec;
  /** Backend of every rank (default `"auto"`: WebGPU when an adapter exists, else CPU). */
  readonly backend?: BackendKind;
  /** Loss on the last stage: `"cross-entropy"` (targets are class ids) or `"mse"`. */
  readonly loss: PipelineLoss;
  /** One Deno worker per rank (default true); false runs every rank in this thread. */
  readonly workers?: boolean;
  /**
   * Where the ranks run (default `"workers"`, or `"in-process"` with
   * `workers: false`): `"workers"`, one Deno worker per rank;
   * `"in-process"`, every rank in this thread; `"mpi"`, this process is one
   * rank of an MPI job: run the same script under `mpirun -n <ranks>` (see
   * `MpiRankGroup` for how the processes meet, and the README's MPI
   * section). With `"mpi"` every process makes the same model calls in the
   * same order; each builds only its own stages.
   */
  readonly rankGroup?: RankGroupKind;
  /**
   * With `rankGroup: "mpi"`: this process's transport, whose rank and size
   * are this process's rank and the rank count (default: the process's
   * `MpiBackend`, started by the first such model and kept open for later
   * ones until the process exits).
   */
  readonly comm?: CommBackend;
  /**
   * Clip by the global gradient norm; makes the ranks exchange their partial
   * sums at the end of each iteration, a barrier (see the model stage
   * executor's module documentation).
   */
  readonly clipGradNorm?: number;
  /** A rank silent this long (ms) is declared hung (workers; default 5000). */
  readonly heartbeatMs?: number;
  /** No progress on any rank for this long (ms) fails the step (workers; default 60 000). */
  readonly stallTimeoutMs?: number;
  /** Modules every rank imports first: they register custom layers with `registerLayer`. */
  readonly modules?: readonly (string | URL)[];
  /** Failure injection (tests): see `checkFaultInjection` in `@conveyor/core/testing`. */
  readonly faultInjection?: FaultInjection;
}

/** The options after their checks, with defaults filled in. */
export interface CheckedModelOptions {
  readonly model: Sequential;
  readonly optimizer: OptimizerSpec;
  readonly loss: PipelineLoss;
  readonly backend: BackendKind;
  readonly workers: boolean;
  readonly rankGroup: RankGroupKind;
  readonly comm?: CommBackend;
  readonly checkpoint?: ActivationCheckpointOptions;
  readonly clipGradNorm?: number;
  readonly modules: readonly string[];
  readonly faultInjection?: FaultInjection;
}

function checkpointOptions(
  c: ActivationCheckpointConfig | ActivationCheckpointOptions,
): ActivationCheckpointOptions {
  const cfg = c instanceof ActivationCheckpointConfig ? c : new ActivationCheckpointConfig(c);
  return {
    enabled: cfg.enabled,
    everyNLayers: cfg.everyNLayers,
    maxActivationsInMemory: cfg.maxActivationsInMemory,
    recompute: cfg.recompute,
    checkpointFirstLayer: cfg.checkpointFirstLayer,
    expensiveKinds: cfg.expensiveKinds,
  };
}

/** Checks every option that needs no schedule (TypeError/RangeError naming the value). */
export function checkModelOptions(o: PipelineParallelModelOptions): CheckedModelOptions {
  if (o === null || typeof o !== "object") {
    throw new TypeError(`options must be an object { model, schedule, ... }, got ${o}`);
  }
  if (!(o.model instanceof Sequential)) {
    throw new TypeError(`model must be a Sequential, got ${String(o.model)}`);
  }
  const optimizer = checkOptimizerSpec(o.optimizer);
  if (o.loss !== "cross-entropy" && o.loss !== "mse") {
    throw new TypeError(`loss must be "cross-entropy" or "mse", got ${JSON.stringify(o.loss)}`);
  }
  const backend = o.backend ?? "auto";
  if (backend !== "auto" && backend !== "cpu" && backend !== "webgpu") {
    throw new RangeError(
      `backend must be "auto", "cpu" or "webgpu", got ${JSON.stringify(o.backend)}`,
    );
  }
  const { rankGroup, comm } = checkRankGroup(o);
  const workers = rankGroup === "workers";
  const checkpoint = o.checkpoint === undefined ? undefined : checkpointOptions(o.checkpoint);
  if (
    o.clipGradNorm !== undefined &&
    (typeof o.clipGradNorm !== "number" || !(o.clipGradNorm > 0) ||
      !Number.isFinite(o.clipGradNorm))
  ) {
    throw new RangeError(
      `clipGradNorm must be a finite positive number, got ${String(o.clipGradNorm)}`,
    );
  }
  // Checked in every mode, though only worker ranks use them.
  for (const [name, v] of [["heartbeatMs", o.heartbeatMs], ["stallTimeoutMs", o.stallTimeoutMs]]) {
    if (v !== undefined && (typeof v !== "number" || !(v > 0) || !Number.isFinite(v))) {
      throw new RangeError(`${name} must be a finite number of ms > 0, got ${String(v)}`);
    }
  }
  if (o.modules !== undefined) {
    if (!Array.isArray(o.modules)) {
      throw new TypeError(`modules must be an array of module URLs, got ${typeof o.modules}`);
    }
    o.modules.forEach((m, i) => {
      if (typeof m !== "string" && !(m instanceof URL)) {
        throw new TypeError(`modules[${i}] must be a URL or a string, got ${typeof m}`);
      }
    });
  }
  if (o.faultInjection !== undefined) {
    const fault = checkFaultInjection(o.faultInjection, "faultInjection");
    if (fault.hangAt !== undefined && fault.hang === "block" && !workers) {
      throw new TypeError(
        "faultInjection.hangAt blocks the rank's thread: it needs workers (workers: true)",
      );
    }
  }
  return {
    model: o.model,
    optimizer,
    loss: o.loss,
    backend,
    workers,
    rankGroup,
    ...(comm === undefined ? {} : { comm }),
    ...(checkpoint === undefined ? {} : { checkpoint }),
    ...(o.clipGradNorm === undefined ? {} : { clipGradNorm: o.clipGradNorm }),
    modules: (o.modules ?? []).map((m) => String(m)),
    ...(o.faultInjection === undefined ? {} : { faultInjection: o.faultInjection }),
  };
}
