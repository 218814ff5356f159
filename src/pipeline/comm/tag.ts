/**
 * Message tags for pipeline traffic: one key space for activations and one
 * for gradients, each keyed by iteration, destination chunk and micro-batch,
 * so that two different tensors can never share a tag.
 *
 * @module
 */

/** Which way a tensor flows: activations forward, gradients backward. */
export type TagSpace = "activation" | "gradient";

/** The fields that identify one pipeline tensor in flight. */
export interface TagFields {
  /** Activation (forward) or gradient (backward) traffic. */
  readonly space: TagSpace;
  /** Micro-batch index (non-negative integer). */
  readonly microBatch: number;
  /** Global stage (chunk) index the tensor is addressed to (non-negative integer). */
  readonly chunk: number;
  /** Training iteration (non-negative integer). */
  readonly iteration: number;
  /**
   * Attempt at the iteration (default 0): an iteration replayed after a
   * rolled-back step runs again as attempt 1, 2, …, so its messages never
   * meet the abandoned attempt's.
   */
  readonly attempt?: number;
}

const PREFIX: Readonly<Record<TagSpace, string>> = { activation: "act", gradient: "grad" };

function checkIndex(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${what} must be a non-negative integer, got ${value}`);
  }
  return value;
}

/**
 * Builds the tag of one pipeline tensor. Activation and gradient tags start
 * with different prefixes (`act/…`, `grad/…`), and the numeric fields are
 * separated, so distinct fields always give distinct tags. A replayed
 * iteration's attempt follows its number (`act/i3a1/…`).
 *
 * @example
 * ```ts
 * import { makeTag } from "@conveyor/core/runtime";
 * console.log(makeTag({ space: "activation", microBatch: 3, chunk: 1, iteration: 0 }));
 * // "act/i0/c1/m3"
 * ```
 */
export function makeTag(fields: TagFields): string {
  if (fields === null || typeof fields !== "object") {
    throw new TypeError(`tag fields must be an object { space, microBatch, chunk, iteration }`);
  }
  const prefix = Object.hasOwn(PREFIX, fields.space) ? PREFIX[fields.space] : undefined;
  if (prefix === undefined) {
    throw new TypeError(
      `tag space must be "activation" or "gradient", got ${JSON.stringify(fields.space)}`,
    );
  }
  const it = checkIndex(fields.iteration, "iteration");
  const chunk = checkIndex(fields.chunk, "chunk");
  const mb = checkIndex(fields.microBatch, "microBatch");
  const attempt = checkIndex(fields.attempt ?? 0, "attempt");
  return `${prefix}/i${it}${attempt === 0 ? "" : `a${attempt}`}/c${chunk}/m${mb}`;
}
