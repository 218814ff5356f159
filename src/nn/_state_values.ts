// What values weights and optimizer state may hold when they are loaded:
// finite, unless the loader allows non-finite values (a diverged run's
// checkpoint, loaded as it was written), and, for AdamW's second moments
// (`exp_avg_sq`, an average of squared gradients), never negative, whatever
// the loader allows: no run writes a negative one. Used by the training
// checkpoint reader and the optimizers' `checkState`; not exported from the
// package.

/** The slots whose values are averages of squares: never below 0. */
const NON_NEGATIVE_SLOTS: ReadonlySet<string> = new Set(["exp_avg_sq"]);

/**
 * Throws a RangeError (`prefix` first) naming `tensor` and the index of
 * its first value that `slot`'s rule refuses. `slot` null: weights.
 */
export function checkValues(
  prefix: string,
  tensor: string,
  data: Float32Array,
  slot: string | null,
  allowNonFinite: boolean,
): void {
  const nonNegative = slot !== null && NON_NEGATIVE_SLOTS.has(slot);
  const what = slot === null ? "weights" : "optimizer state";
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (nonNegative && v < 0) {
      throw new RangeError(
        `${prefix}tensor ${tensor} holds ${v} at index ${i}; ${slot} (AdamW's second moments, ` +
          "an average of squared gradients) is never negative, so the state is invalid",
      );
    }
    if (!allowNonFinite && !Number.isFinite(v)) {
      throw new RangeError(
        `${prefix}tensor ${tensor} holds ${v} at index ${i}; ${what} must be finite ` +
          "(pass allowNonFinite to load it anyway)",
      );
    }
  }
}
