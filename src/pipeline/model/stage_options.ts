/**
 * The model stage executor's options, per-iteration payload and report:
 * the plain data that crosses to each rank.
 *
 * @module
 */

import type { MatmulConfig } from "../../tensor/mod.ts";
import type { BackendKind } from "../../tensor/create_backend.ts";
import type { LayerSpec } from "../../nn/layer.ts";
import type { OptimizerSpec } from "../../nn/optimizer_spec.ts";
import type { ActivationCheckpointOptions } from "../checkpoint/checkpoint.ts";
import type { RunPolicy } from "../runtime/run_policy.ts";
import { describeValue } from "../../text/describe.ts";

/** The losses a model stage computes on the last stage. */
export type PipelineLoss = "cross-entropy" | "mse";

/**
 * A shared parameter held on two ranks (tied embeddings): the stage and
 * rank of its owner (the embedding) and of the `TiedHead` holding a copy.
 *
 * @example
 * ```ts
 * import type { TiedLink } from "@conveyor/core/runtime";
 * const link: TiedLink = {
 *   name: "0.token", ownerStage: 0, ownerRank: 0, headStage: 1, headRank: 1, headParam: "4.weight",
 * };
 * console.log(link.headParam); // "4.weight"
 * ```
 */
export interface TiedLink {
  /** The parameter's name in the whole model (e.g. `"0.token"`). */
  readonly name: string;
  /** Stage and rank of the layer that owns it (the embedding). */
  readonly ownerStage: number;
  /** See `ownerStage`. */
  readonly ownerRank: number;
  /** Stage and rank of the `TiedHead` holding a copy. */
  readonly headStage: number;
  /** See `headStage`. */
  readonly headRank: number;
  /** The copy's name within the head's stage (`<layer>.weight`). */
  readonly headParam: string;
}

/** `init.options` of the model stage executor (structured-cloneable). */
export interface ModelStageOptions {
  /** One spec per global stage: the stage as a `Sequential` (names as in the whole model). */
  readonly stageSpecs: readonly LayerSpec[];
  /**
   * Tied parameters held on two ranks (a `TiedHead` and the table it
   * shares): both copies' gradients are summed before either stage steps.
   */
  readonly tied?: readonly TiedLink[];
  /** Backend each rank creates (default `"cpu"`). */
  readonly backend?: BackendKind;
  /** Threads of each rank's CPU backend (default: every core). */
  readonly threads?: number;
  /**
   * On WebGPU: the large-matmul variant tuned once for all ranks (e.g. on
   * the main thread; see `WebGPUBackendOptions.tunedMatmul`), so that no
   * worker times the candidates itself (workers have no tuning cache) and
   * every rank runs the same kernels. Absent: each rank tunes (or hits the
   * cache).
   */
  readonly tunedMatmul?: MatmulConfig;
  /** Loss of the last stage: cross-entropy against class ids, or mean squared error. */
  readonly loss: PipelineLoss;
  /** Optimizer of every stage. */
  readonly optimizer: OptimizerSpec;
  /** Activation checkpointing of every stage (absent: plain stages). */
  readonly checkpoint?: ActivationCheckpointOptions;
  /**
   * The run's policy, the rank group's own (absent: none). With a
   * `nonFinite` other than `"off"`, every stage copies its parameters and
   * optimizer state before it steps and publishes its check, so that the
   * runtime can roll a bad step back exactly; with `clipGradNorm`, each
   * stage's check carries its sum of squared gradients and a clipped step
   * is redone (see `RankRunOptions.policy`).
   */
  readonly policy?: RunPolicy;
  /** Module URLs to import before building the stages (they register custom layers). */
  readonly modules?: readonly string[];
  /**
   * ZeRO-1: this rank is replica `replica` of `replicas`, and each of its
   * stages' optimizers holds and steps only that replica's share (absent:
   * whole optimizers).
   */
  readonly shard?: { readonly replica: number; readonly replicas: number };
}

/** What a rank needs for one iteration (`beginIteration`'s payload). */
export interface ModelStagePayload {
  /**
   * The training step this iteration is (0-based over the model's life,
   * as a single-device loop counts them): the `step` of the layers'
   * forward context (Dropout's mask). Absent in forward-only runs.
   */
  readonly step?: number;
  /**
   * Row of the whole batch where this payload's rows begin (default 0): a
   * data-parallel shard's first row, so that per-row randomness (Dropout)
   * matches training on the whole batch.
   */
  readonly firstRow?: number;
  /** Rows (dim 0) of each micro-batch. */
  readonly rows: readonly number[];
  /** Rows of the whole batch's prediction (product of all dims but the last): the loss's N. */
  readonly totalRows: number;
  /** Per global stage: its input shape without dim 0. */
  readonly inputTails: readonly (readonly number[])[];
  /** The targets' shape without dim 0 (unused in forward-only runs). */
  readonly targetTail: readonly number[];
  /** Inputs per micro-batch (on the rank holding stage 0). */
  readonly inputs?: readonly Float32Array[];
  /** Targets per micro-batch (on the rank holding the last stage). */
  readonly targets?: readonly Float32Array[];
}

/** What a rank reports at the end of each iteration. */
export interface ModelStageReport {
  /** The iteration. */
  readonly iteration: number;
  /** Sum of the micro-batch losses (the full-batch loss) on the last stage's rank, else null. */
  readonly loss: number | null;
  /**
   * Peak bytes on this rank's backend during the iteration above its
   * training state (parameters, gradients, optimizer state and the copies a
   * step keeps for a rollback, counted tensor by tensor): the activations
   * kept for backward plus the temporaries of the passes, measured with
   * `backend.memory`. An optimizer step's own temporaries are not counted;
   * on WebGPU a result being read back counts until it is read.
   */
  readonly peakActivationBytes: number;
  /**
   * Not set by the model stage any more: with clipping by post-validation
   * the global norm is known only once every stage's flag is in, after the
   * iteration's report; the run's `RankGroupRunResult.gradNorms` carries it.
   * @deprecated Read `RankGroupRunResult.gradNorms` (or `StepResult.gradNorm`).
   */
  readonly gradNorm?: number;
  /** The learning rate of the iteration's optimizer steps (training runs). */
  readonly lr?: number;
  /**
   * Forward-only runs with targets (evaluation), cross-entropy, on the last
   * stage's rank: rows whose first maximal logit is the target class.
   */
  readonly correct?: number;
  /**
   * Forward-only runs (prediction), on the last stage's rank: the model's
   * output per micro-batch, in micro-batch order.
   */
  readonly outputs?: readonly { readonly data: Float32Array; readonly shape: number[] }[];
}

/** Checks a rank's options against the stages it holds. */
export function checkStageOptions(o: ModelStageOptions, stages: readonly number[]): void {
  if (o === null || typeof o !== "object") {
    throw new TypeError(`model stage options must be an object, got ${describeValue(o)}`);
  }
  if (!Array.isArray(o.stageSpecs)) {
    throw new TypeError("model stage options.stageSpecs must be an array of layer specs");
  }
  for (const s of stages) {
    if (o.stageSpecs[s] === undefined) {
      throw new RangeError(`model stage options.stageSpecs has no spec for stage ${s}`);
    }
  }
  if (o.loss !== "cross-entropy" && o.loss !== "mse") {
    throw new TypeError(`loss must be "cross-entropy" or "mse", got ${JSON.stringify(o.loss)}`);
  }
}

/**
 * Whether a rank checks its steps (a `nonFinite` other than `"off"`, or
 * clipping): each stage then copies its parameters and optimizer state
 * before it steps and publishes its check.
 */
export function checksSteps(o: ModelStageOptions): boolean {
  const p = o.policy;
  return p !== undefined && (p.nonFinite !== "off" || p.clipGradNorm !== undefined);
}
