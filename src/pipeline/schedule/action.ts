/**
 * Pipeline actions and their text form as PyTorch writes them (`2F0`, `1I3`).
 *
 * A schedule is data: for every rank, the ordered list of actions it runs.
 *
 * @module
 */

/**
 * Kind of a pipeline action: F forward, B full backward (input and weight
 * gradients together), I input-gradient only, W weight-gradient only.
 */
export type ActionKind = "F" | "B" | "I" | "W";

/** One unit of pipeline work: a pass of one model stage over one micro-batch. */
export interface Action {
  /** What the pass computes. */
  readonly kind: ActionKind;
  /** Global model stage index, 0 … ranks·V−1. */
  readonly stage: number;
  /** Micro-batch index, 0 … m−1. */
  readonly microBatch: number;
}

/** A schedule: for each rank, its actions in execution order. */
export type RankActions = readonly (readonly Action[])[];

const ACTION_RE = /^(\d+)([FBIW])(\d+)$/;

/**
 * Formats an action in PyTorch's text form: stage, kind, micro-batch.
 *
 * @example
 * ```ts
 * import { formatAction } from "@conveyor/core/analysis";
 * console.log(formatAction({ kind: "F", stage: 2, microBatch: 0 })); // "2F0"
 * ```
 */
export function formatAction(a: Action): string {
  return `${a.stage}${a.kind}${a.microBatch}`;
}

/**
 * Parses PyTorch's text form of an action (`2F0`, `1I3`, `0W7`, `3B1`).
 * Surrounding whitespace is ignored. Throws a TypeError on anything else.
 *
 * @example
 * ```ts
 * import { parseAction } from "@conveyor/core/analysis";
 * console.log(parseAction("1I3")); // { kind: "I", stage: 1, microBatch: 3 }
 * ```
 */
export function parseAction(text: string): Action {
  const m = ACTION_RE.exec(String(text).trim());
  if (m === null) {
    throw new TypeError(
      `action must look like <stage><F|B|I|W><microBatch> (e.g. "2F0"), got ${
        JSON.stringify(text)
      }`,
    );
  }
  return { kind: m[2] as ActionKind, stage: Number(m[1]), microBatch: Number(m[3]) };
}
