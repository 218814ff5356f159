// Errors as plain fields and back, for errors that cross a process
// boundary (subprocess rank groups). Not exported from the package.

import { PipelineRankError, type PipelineRankErrorInit } from "./pipeline_rank_error.ts";

/** An error's fields. */
export interface ErrorFields {
  readonly name: string;
  readonly message: string;
  readonly stack?: string;
  readonly pipeline?: Omit<PipelineRankErrorInit, "workerStack">;
}

/** `e` as plain fields. */
export function toErrorFields(e: unknown): ErrorFields {
  const err = e instanceof Error ? e : new Error(String(e));
  return {
    name: err.name,
    message: err.message,
    stack: err.stack,
    ...(err instanceof PipelineRankError
      ? {
        pipeline: {
          rank: err.rank,
          kind: err.kind,
          ...(err.action === undefined ? {} : { action: err.action }),
          ...(err.iteration === undefined ? {} : { iteration: err.iteration }),
          ...(err.between ? { between: true } : {}),
          detail: err.detail,
        },
      }
      : {}),
  };
}

/** The error `f` describes: a PipelineRankError, RangeError, TypeError or Error. */
export function fromErrorFields(f: ErrorFields): Error {
  if (f.pipeline !== undefined) return new PipelineRankError(f.pipeline);
  const E = f.name === "RangeError" ? RangeError : f.name === "TypeError" ? TypeError : Error;
  const e = new E(f.message);
  if (E === Error && f.name !== "Error") e.name = f.name;
  return e;
}
