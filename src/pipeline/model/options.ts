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
import type { ScheduleName } from "../schedule/generate.ts";
import type { PartitionStrategy } from "../partition/partition.ts";
import type { CostSource } from "../partition/layer_costs.ts";
import {
  ActivationCheckpointConfig,
  type ActivationCheckpointOptions,
} from "../checkpoint/checkpoint.ts";
import { checkFaultInjection, faultInjectionOf } from "../runtime/fault_injection.ts";
import { checkRunPolicy, type NonFinitePolicy, type RunPolicy } from "../runtime/run_policy.ts";
import type { CommBackend } from "../comm/backend.ts";
import type { PipelineLoss } from "./model_rank_executor.ts";
import { describeValue } from "../../text/describe.ts";
import { editDistance } from "../../text/nearest.ts";

/** Options of `PipelineParallelModel.create`. */
export interface PipelineParallelModelOptions {
  /** The model; its weights are copied at creation (it is not changed or kept in sync). */
  readonly model: Sequential;
  /** A schedule name (built with `ranks`, `microBatches`, `stagesPerRank`) or a schedule. */
  readonly schedule: ScheduleName | Schedule;
  /** Pipeline ranks p (with a schedule name; must match a given schedule). */
  readonly ranks?: number;
  /** Micro-batches per step m (with a schedule name; must match a given schedule). */
  readonly microBatches?: number;
  /**
   * Data parallelism: D copies (replicas) of the pipeline, D·P ranks in all
   * (default 1). Each step's batch is cut into D equal shards along dim 0
   * (a batch whose rows are not a multiple of D is refused), replica k
   * trains on rows `[k·R, (k+1)·R)`, and each stage's gradients are
   * averaged across its D replicas (in replica order: every replica keeps
   * the same bits) right after its last backward of the step, before it
   * steps. Training equals training on the whole batch. With
   * `rankGroup` `"in-process"`, `"workers"` or `"mpi"` (then D·P processes:
   * `mpirun -n D·P`, process `k·P + p` running pipeline rank p of replica k).
   */
  readonly dataParallel?: number;
  /**
   * ZeRO-1 (default false): with `dataParallel` D each replica of a
   * pipeline rank keeps and steps only 1/D of each stage's optimizer state
   * (a contiguous share of the stage's parameters read as one vector): the
   * gradients are reduce-scattered instead of all-reduced, each replica
   * steps its share, and the replicas all-gather the updated parameters.
   * Training equals the unsharded run; checkpoints are written gathered in
   * the single-device format and load into any (D, P), sharded or not.
   * With D = 1 there is nothing to share: the optimizer is whole.
   */
  readonly shardOptimizer?: boolean;
  /** Stages per rank V (with a schedule name; default the schedule's own). */
  readonly stagesPerRank?: number;
  /** How the layers are cut into p·V stages (default `LoadBalancedPartition` on `partitionCosts`). */
  readonly partition?: PartitionStrategy;
  /** Cost of each layer for the partition (default `"flops"`). */
  readonly partitionCosts?: CostSource;
  /**
   * Input shape used for the FLOPs costs; default inferred from the first
   * layer (an embedding: `[1, maxLen]` or `[1, 1]`, a Linear `[1, in]`, …).
   */
  readonly inputShape?: Shape;
  /** Activation checkpointing of every stage (default none). */
  readonly checkpoint?: ActivationCheckpointConfig | ActivationCheckpointOptions;
  /** Optimizer of every stage, stepped right after that stage's last backward. */
  readonly optimizer: OptimizerSpec;
  /**
   * Backend of every rank (default `"auto"`: WebGPU on a hardware adapter,
   * else the CPU backend, decided once and said once on stderr; see
   * `chooseBackend`). `"webgpu"` uses a software adapter (llvmpipe) too.
   */
  readonly backend?: BackendKind;
  /**
   * Threads of each rank's CPU backend (its kernels' threads; default
   * `max(1, floor(cores / (ranks × dataParallel)))`, so that the ranks
   * share the cores and never use more threads in all than there are
   * cores). Unused on WebGPU.
   */
  readonly threads?: number;
  /** Loss on the last stage: `"cross-entropy"` (targets are class ids) or `"mse"`. */
  readonly loss: PipelineLoss;
  /**
   * Where the ranks run (default `"workers"`): one Deno worker per rank;
   * `"subprocess"`, the same workers in a child process, which can always
   * be ended (a rank whose code holds its thread in a loop or a blocking
   * wait cannot be ended in a worker, and keeps the process alive), at the
   * cost of a process start and `--allow-run`; `"in-process"`, every rank in
   * this thread (for debugging); `"mpi"`, this process is one rank of an
   * MPI job: run the same script under `mpirun -n <ranks>`, every process
   * making the same model calls in the same order, each building only its
   * own stages (see `SpmdRankGroup` and the README's MPI section).
   */
  readonly rankGroup?: "workers" | "subprocess" | "in-process" | "mpi";
  /**
   * With `rankGroup: "mpi"`: this process's transport, whose rank and size
   * are this process's rank and the rank count (default: the process's
   * `MpiBackend`, started by the first such model and kept open for later
   * ones until the process exits).
   */
  readonly comm?: CommBackend;
  /**
   * With `rankGroup: "mpi"`: more named values every process must agree on
   * (your script's seed, batch size, data file…). `create` compares them,
   * with the model's own (schedule, layers, initial weights or the
   * `resume` checkpoint, optimizer and its learning-rate schedule, loss,
   * checkpointing, clipping), with rank 0's and refuses a difference on
   * every process, naming it.
   */
  readonly sameOnEveryRank?: Readonly<Record<string, string | number | boolean>>;
  /**
   * Clip by the global gradient norm, as `clipGradNorm` on one device,
   * with no barrier: each stage steps unclipped and a step whose global norm
   * turns out above the limit is redone clipped on every stage, the next
   * iteration then running again (post-validation: every rank learns the
   * global norm once each stage has stepped). `StepResult.gradNorm` is the norm
   * before clipping.
   */
  readonly clipGradNorm?: number;
  /** A rank silent this long (ms) is declared hung (workers; default 5000). */
  readonly heartbeatMs?: number;
  /** No progress on any rank for this long (ms) fails the step (workers; default 60 000). */
  readonly stallTimeoutMs?: number;
  /** Modules every rank imports first: they register custom layers with `registerLayer`. */
  readonly modules?: readonly (string | URL)[];
  /**
   * What a step whose loss or gradients are not finite does (default
   * `"skip"`): `"skip"` rolls it back on every stage (parameters and
   * optimizer state as before it, bit for bit; the step's result says
   * `skipped: true` and where the value appeared) and training goes on;
   * `"throw"` rolls it back the same way and stops `train` with a
   * `NonFiniteStepError`; `"off"` checks nothing. The check costs no barrier
   * between steps (each stage steps at once and the verdict follows, see
   * the README); it keeps a copy of each stage's parameters and optimizer
   * state until the verdict.
   */
  readonly nonFinite?: NonFinitePolicy;
  /**
   * A training checkpoint to start from (a path, a file URL or its bytes):
   * read and checked against the model before any rank starts, then loaded
   * into every rank, as `loadCheckpoint` does; `resumedFrom` tells its step
   * and data.
   */
  readonly resume?: string | URL | Uint8Array;
  /**
   * Load a `resume` checkpoint holding NaN or ±Infinity in its weights or
   * optimizer state (default `false`: refused, naming the tensor and the
   * index, as `loadCheckpoint` without `allowNonFinite`).
   */
  readonly resumeAllowNonFinite?: boolean;
}

/** The options after their checks, with defaults filled in. */
export interface CheckedModelOptions {
  readonly model: Sequential;
  readonly optimizer: OptimizerSpec;
  readonly loss: PipelineLoss;
  readonly backend: BackendKind;
  readonly rankGroup: "workers" | "subprocess" | "in-process" | "mpi";
  /** Replicas D (1: one pipeline). */
  readonly dataParallel: number;
  /** Threads per rank's CPU backend; undefined: the cores shared (see the option). */
  readonly threads?: number;
  /** ZeRO-1: the optimizer state sharded across the D replicas (false with D = 1). */
  readonly shardOptimizer: boolean;
  readonly comm?: CommBackend;
  readonly sameOnEveryRank: Readonly<Record<string, string | number | boolean>>;
  readonly checkpoint?: ActivationCheckpointOptions;
  readonly modules: readonly string[];
  /** The run's policy (`nonFinite` default `"skip"`), carried unchanged to every rank. */
  readonly policy: RunPolicy;
  readonly resumeAllowNonFinite: boolean;
}

// Every option's name, once (the compiler checks the list against the type both ways).
const OPTION_NAMES = [
  "model",
  "schedule",
  "ranks",
  "microBatches",
  "dataParallel",
  "shardOptimizer",
  "stagesPerRank",
  "partition",
  "partitionCosts",
  "inputShape",
  "checkpoint",
  "optimizer",
  "backend",
  "threads",
  "loss",
  "rankGroup",
  "comm",
  "sameOnEveryRank",
  "clipGradNorm",
  "heartbeatMs",
  "stallTimeoutMs",
  "modules",
  "nonFinite",
  "resume",
  "resumeAllowNonFinite",
] as const satisfies readonly (keyof PipelineParallelModelOptions)[];
const _everyOptionNamed: Exclude<keyof PipelineParallelModelOptions, typeof OPTION_NAMES[number]> =
  undefined as never;

/**
 * Refuses an option `create` does not know, naming it and the nearest
 * known one (a TypeError): a misspelt option would otherwise be ignored.
 */
function checkOptionNames(o: object): void {
  for (const name of Object.keys(o)) {
    if ((OPTION_NAMES as readonly string[]).includes(name)) continue;
    const lower = name.toLowerCase();
    // The edit distance, less half the letters the names begin with alike.
    const scored = OPTION_NAMES.map((k) => {
      const known = k.toLowerCase();
      let prefix = 0;
      while (prefix < known.length && known[prefix] === lower[prefix]) prefix++;
      return { k, d: editDistance(lower, known) - prefix / 2 };
    });
    const best = scored.reduce((a, b) => b.d < a.d ? b : a);
    // Near: at most a third of the name's letters off (two at least).
    const near = best.d <= Math.max(2, Math.floor(name.length / 3));
    throw new TypeError(
      `unknown option ${name}: ${
        near ? `did you mean ${best.k}?` : `the options are ${OPTION_NAMES.join(", ")}`
      }`,
    );
  }
}

function checkpointOptions(
  c: ActivationCheckpointConfig | ActivationCheckpointOptions,
): ActivationCheckpointOptions {
  if (c === null || typeof c !== "object") {
    const policy = c === "none" || c === "selective" || c === "full";
    throw new TypeError(
      `checkpoint must be an ActivationCheckpointConfig or its options { recompute, everyNLayers, … }, got ${
        describeValue(c)
      }${policy ? `: pass { recompute: ${JSON.stringify(c)} }` : ""}`,
    );
  }
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
    throw new TypeError(
      `options must be an object { model, schedule, ... }, got ${describeValue(o)}`,
    );
  }
  checkOptionNames(o);
  if (!(o.model instanceof Sequential)) {
    throw new TypeError(`model must be a Sequential, got ${describeValue(o.model)}`);
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
  const threads = o.threads;
  if (
    threads !== undefined &&
    (typeof threads !== "number" || !Number.isInteger(threads) || threads < 1 || threads > 1024)
  ) {
    throw new RangeError(
      `threads must be an integer from 1 to 1024 (each rank's CPU threads), got ${
        describeValue(threads)
      }`,
    );
  }
  const kinds = ["workers", "subprocess", "in-process", "mpi"] as const;
  if (o.rankGroup !== undefined && !kinds.includes(o.rankGroup)) {
    throw new TypeError(
      `rankGroup must be one of ${kinds.join(", ")}, got ${JSON.stringify(o.rankGroup)}`,
    );
  }
  const rankGroup = o.rankGroup ?? "workers";
  const dataParallel = o.dataParallel ?? 1;
  if (typeof dataParallel !== "number" || !Number.isInteger(dataParallel) || dataParallel < 1) {
    throw new RangeError(
      `dataParallel must be a positive integer (the pipeline's replicas D), got ${
        describeValue(o.dataParallel)
      }`,
    );
  }
  if (dataParallel > 1 && rankGroup === "subprocess") {
    throw new TypeError(
      `dataParallel ${dataParallel} needs rankGroup "in-process", "workers" or "mpi", not ${
        JSON.stringify(rankGroup)
      }`,
    );
  }
  if (o.shardOptimizer !== undefined && typeof o.shardOptimizer !== "boolean") {
    throw new TypeError(
      `shardOptimizer must be a boolean, got ${describeValue(o.shardOptimizer)}`,
    );
  }
  const workers = rankGroup === "workers" || rankGroup === "subprocess";
  const comm = checkComm(o.comm, rankGroup);
  const checkpoint = o.checkpoint === undefined ? undefined : checkpointOptions(o.checkpoint);
  // Every policy field is checked in every mode, as the user wrote it.
  const faultInjection = faultInjectionOf(o);
  const policy = checkRunPolicy({
    nonFinite: o.nonFinite ?? "skip",
    ...(o.clipGradNorm === undefined ? {} : { clipGradNorm: o.clipGradNorm }),
    ...(o.heartbeatMs === undefined ? {} : { heartbeatMs: o.heartbeatMs }),
    ...(o.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: o.stallTimeoutMs }),
    ...(faultInjection === undefined ? {} : { faultInjection }),
  });
  if (o.resumeAllowNonFinite !== undefined && typeof o.resumeAllowNonFinite !== "boolean") {
    throw new TypeError(
      `resumeAllowNonFinite must be a boolean, got ${describeValue(o.resumeAllowNonFinite)}`,
    );
  }
  const same = o.sameOnEveryRank ?? {};
  if (same === null || typeof same !== "object" || Array.isArray(same)) {
    throw new TypeError(
      `sameOnEveryRank must be an object of named values, got ${describeValue(same)}`,
    );
  }
  for (const [k, v] of Object.entries(same)) {
    if (!["string", "number", "boolean"].includes(typeof v)) {
      throw new TypeError(
        `sameOnEveryRank.${k} must be a string, number or boolean, got ${describeValue(v)}`,
      );
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
  if (policy.faultInjection !== undefined) {
    const fault = checkFaultInjection(policy.faultInjection, "faultInjection");
    const holds = ["hang", "block", "loop", "exit"].includes(fault.fault);
    if (holds && !workers) {
      throw new TypeError(
        `faultInjection "${fault.fault}" holds or ends the rank's thread: it needs ranks in ` +
          `workers or a subprocess, not ${
            rankGroup === "mpi" ? "in this MPI process" : 'in this thread (rankGroup "in-process")'
          }`,
      );
    }
  }
  return {
    model: o.model,
    optimizer,
    loss: o.loss,
    backend,
    rankGroup,
    dataParallel,
    ...(threads === undefined ? {} : { threads }),
    shardOptimizer: o.shardOptimizer === true && dataParallel > 1,
    ...(comm === undefined ? {} : { comm }),
    sameOnEveryRank: { ...same },
    ...(checkpoint === undefined ? {} : { checkpoint }),
    modules: (o.modules ?? []).map((m) => String(m)),
    policy,
    resumeAllowNonFinite: o.resumeAllowNonFinite ?? false,
  };
}

function checkComm(
  comm: unknown,
  rankGroup: CheckedModelOptions["rankGroup"],
): CommBackend | undefined {
  if (comm === undefined) return undefined;
  if (rankGroup !== "mpi") {
    throw new TypeError(
      `comm is the transport of rankGroup "mpi", but rankGroup is ${JSON.stringify(rankGroup)}`,
    );
  }
  const c = comm as Partial<CommBackend> | null;
  if (
    c === null || typeof c !== "object" || typeof c.send !== "function" ||
    typeof c.recv !== "function" || !Number.isInteger(c.rank) || !Number.isInteger(c.size)
  ) {
    throw new TypeError(`comm must be a CommBackend, got ${describeValue(comm)}`);
  }
  return comm as CommBackend;
}
