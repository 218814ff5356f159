/**
 * Random next-token batches from a token stream.
 *
 * @module
 */

import { Rng } from "../tensor/random.ts";
import { describeValue } from "../text/describe.ts";

/** A batch of `batch` windows of `seqLen` tokens and their next tokens. */
export interface TokenBatch {
  /** Token ids `[batch, seqLen]`, row-major, as f32. */
  readonly ids: Float32Array;
  /**
   * The same array as `ids`, under the name a training batch gives its
   * inputs: a `TokenBatch` is a `TrainingBatch` as it is.
   */
  readonly inputs: Float32Array;
  /** The token following each id, `[batch, seqLen]`, as f32. */
  readonly targets: Float32Array;
  /** `[batch, seqLen]`. */
  readonly shape: [number, number];
}

/**
 * Draws `batch` windows at uniformly random starts of `tokens`: row b is
 * `tokens[s_b .. s_b + seqLen)` and its targets the same window shifted by
 * one. Upload with `backend.fromData(b.ids, b.shape)`; `model.train` takes
 * it as it is (`inputs` is `ids`).
 *
 * @example
 * ```ts
 * import { Rng } from "@conveyor/core";
 * import { CharTokenizer, sampleBatch } from "@conveyor/core/data";
 * const text = "abcabcabcabc";
 * const tok = CharTokenizer.fromText(text);
 * const b = sampleBatch(tok.encode(text), 2, 4, new Rng(0));
 * console.log(b.shape, b.ids.length); // [2, 4] 8
 * console.log(b.inputs === b.ids); // true
 * ```
 */
export function sampleBatch(
  tokens: ArrayLike<number>,
  batch: number,
  seqLen: number,
  rng: Rng,
): TokenBatch {
  for (const [what, v] of [["batch", batch], ["seqLen", seqLen]] as const) {
    if (!Number.isInteger(v) || v <= 0) {
      throw new RangeError(
        `sampleBatch: ${what} must be a positive integer, got ${describeValue(v)}`,
      );
    }
  }
  if (!(rng instanceof Rng)) throw new TypeError(`sampleBatch: rng must be an Rng`);
  if (tokens.length < seqLen + 1) {
    throw new RangeError(
      `sampleBatch: need at least seqLen + 1 = ${seqLen + 1} tokens, got ${tokens.length}`,
    );
  }
  const ids = new Float32Array(batch * seqLen);
  const targets = new Float32Array(batch * seqLen);
  const starts = tokens.length - seqLen; // valid starts: 0 … length − seqLen − 1
  for (let b = 0; b < batch; b++) {
    const s = rng.int(starts);
    for (let t = 0; t < seqLen; t++) {
      ids[b * seqLen + t] = tokens[s + t];
      targets[b * seqLen + t] = tokens[s + t + 1];
    }
  }
  return { ids, inputs: ids, targets, shape: [batch, seqLen] };
}
