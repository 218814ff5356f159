/**
 * The error a pipeline run fails with when one rank fails, hangs or stalls:
 * it names the rank and, where known, the action, stage, micro-batch and
 * iteration.
 *
 * @module
 */

import { type Action, formatAction } from "../schedule/action.ts";

/** Why a rank brought the run down. */
export type PipelineFailureKind = "error" | "hang" | "stall" | "startup" | "exit";

const VERB: Readonly<Record<PipelineFailureKind, string>> = {
  error: "failed",
  hang: "hung",
  stall: "stalled",
  startup: "failed to start",
  exit: "exited",
};

/**
 * What {@linkcode PipelineRankError} is built from: its fields, and the
 * failed rank's stack where it ran in another thread or process.
 */
export type PipelineRankErrorInit =
  & Pick<PipelineRankError, "rank" | "kind" | "action" | "iteration" | "between" | "detail">
  & {
    /** The rank's own stack (a worker's or another process's), when there is one. */
    readonly workerStack?: string;
  };

/**
 * A rank of a pipeline run (in this thread, a worker, a subprocess or an
 * MPI process) failed (`kind` "error"), stopped sending
 * heartbeats ("hang"), made no progress ("stall"), could not start
 * ("startup") or went away ("exit").
 *
 * @example
 * ```ts
 * import { PipelineRankError } from "@conveyor/core";
 * const e = new PipelineRankError({
 *   rank: 2, kind: "error", action: { kind: "F", stage: 2, microBatch: 5 }, iteration: 0,
 *   detail: "boom",
 * });
 * console.log(e.message);
 * // "rank 2 failed in 2F5 (stage 2, microBatch 5, iteration 0): boom"
 * ```
 */
export class PipelineRankError extends Error {
  /** The rank that failed. */
  readonly rank: number;
  /** What happened. */
  readonly kind: PipelineFailureKind;
  /** The action concerned, when known. */
  readonly action?: Action;
  /** Iteration of that action, when known. */
  readonly iteration?: number;
  /** True when the rank was between actions (e.g. in an optimizer step) after `action`. */
  readonly between?: boolean;
  /** The underlying message. */
  readonly detail: string;

  /** Builds the error and its message from `failure`. */
  constructor(failure: PipelineRankErrorInit) {
    const a = failure.action;
    const where = a === undefined
      ? ""
      : `${failure.between ? " after" : " in"} ${
        formatAction(a)
      } (stage ${a.stage}, microBatch ${a.microBatch}${
        failure.iteration === undefined ? "" : `, iteration ${failure.iteration}`
      })`;
    super(`rank ${failure.rank} ${VERB[failure.kind] ?? "failed"}${where}: ${failure.detail}`);
    this.name = "PipelineRankError";
    this.rank = failure.rank;
    this.kind = failure.kind;
    this.detail = failure.detail;
    if (a !== undefined) this.action = a;
    if (failure.iteration !== undefined) this.iteration = failure.iteration;
    if (failure.between === true) this.between = true;
    if (failure.workerStack !== undefined) {
      this.stack =
        `${this.stack}\n--- worker stack (rank ${failure.rank}) ---\n${failure.workerStack}`;
    }
  }
}
