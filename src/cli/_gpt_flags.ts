// The built-in tiny GPT's flags (`--batch --seq-len --dim --heads --layers
// --seed`), read and checked in one place for `train` and `advise`. Not
// exported from the package.

import type { FlagTable } from "./_options.ts";
import { integer, positiveInt } from "./_options.ts";
import { UsageError } from "./command.ts";

/** The tiny GPT's flags. */
export const GPT_FLAGS = {
  batch: { type: "string" },
  "seq-len": { type: "string" },
  dim: { type: "string" },
  heads: { type: "string" },
  layers: { type: "string" },
  seed: { type: "string" },
} as const satisfies FlagTable;

/** The tiny GPT's shape and seed as the flags give them, checked. */
export interface GptFlags {
  /** Sequences per step. */
  readonly batch: number;
  /** Characters per sequence. */
  readonly seqLen: number;
  /** Model width. */
  readonly dim: number;
  /** Attention heads (they divide `dim`). */
  readonly heads: number;
  /** Seed of the weights (and, with 1 added, of the batches). */
  readonly seed: number;
  /** Transformer blocks for a model cut into `stages` stages: `--layers`, or enough for them. */
  layersFor(stages: number): number;
}

/**
 * Reads the tiny GPT's flags: `--batch` defaults to `defaultBatch`, and must
 * give each of `microBatches` micro-batches a sequence; `--heads` must
 * divide `--dim`. Throws a UsageError naming the flag and its value.
 */
export function readGptFlags(
  values: Record<string, unknown>,
  defaultBatch: number,
  microBatches: number,
): GptFlags {
  const batch = positiveInt(values, "batch", false) ?? defaultBatch;
  const seqLen = positiveInt(values, "seq-len", false) ?? 16;
  const dim = positiveInt(values, "dim", false) ?? 16;
  const heads = positiveInt(values, "heads", false) ?? 2;
  const seed = integer(values, "seed", 1);
  const layers = positiveInt(values, "layers", false);
  if (dim % heads !== 0) {
    throw new UsageError(`--heads must divide --dim, got --heads ${heads} and --dim ${dim}`);
  }
  if (batch < microBatches) {
    throw new UsageError(
      `--batch ${batch} is smaller than --microbatches ${microBatches}: ` +
        "each micro-batch needs at least one sequence",
    );
  }
  return {
    batch,
    seqLen,
    dim,
    heads,
    seed,
    // Embedding, blocks, final norm and head: 3 layers besides the blocks.
    layersFor: (stages) => layers ?? Math.max(2, stages - 3),
  };
}
