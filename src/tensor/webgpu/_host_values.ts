/**
 * What the host still knows about the values of a GPU tensor, so that
 * integer inputs (embedding ids, class targets) can be checked
 * synchronously, before any work is queued, as the CPU backend checks them.
 *
 * Ids almost always reach the device through `fromData`. At upload the
 * data is scanned up to its first value that is not a non-negative integer
 * (so float data such as weights stops the scan at once):
 * - `values` keeps the scanned prefix, that first non-index value included
 *   (all of the data when every value is a non-negative integer, up to
 *   `MAX_ELEMENTS`; larger all-integer uploads keep nothing);
 * - `max` is the largest value before it.
 * Checking ids against a table of n rows is then O(1) when they are all
 * valid (`max < n`), and a scan of `values` for the first offender when not.
 *
 * The record lives with the GPU buffer (reshaped views share it) and is
 * dropped by any later write to that buffer (the device core forgets it on
 * every dispatch that binds the buffer read-write, every copy or clear into
 * it, and its release). Copies, row slices and concatenations of recorded
 * tensors derive their record from the parts.
 *
 * @module
 */

/** Most values kept for one tensor (4 MiB of host memory); beyond, nothing is kept. */
export const MAX_ELEMENTS = 1 << 20;

/** Known values of a device tensor (see the module notes). */
export interface HostValues {
  /** Elements of the tensor. */
  readonly length: number;
  /** The first `values.length` elements. */
  readonly values: Float32Array;
  /** Position of the first value that is not a non-negative integer, or `length`. */
  readonly validUntil: number;
  /** Largest value in `[0, validUntil)` (-1 when that range is empty). */
  readonly max: number;
}

/** The record of `data` (a copy is kept), or null past the size cap. */
export function recordValues(data: Float32Array, length = data.length): HostValues | null {
  let max = -1, i = 0;
  for (; i < data.length; i++) {
    const v = data[i];
    if (!(v >= 0 && Math.floor(v) === v)) break;
    if (v > max) max = v;
  }
  const keep = Math.min(data.length, i + 1);
  if (keep > MAX_ELEMENTS) return null;
  const values = data.slice(0, keep);
  return { length, values, validUntil: i, max };
}

/**
 * The first entry that is not an integer in [0, n) with its value, or null
 * when every entry is one.
 */
export function firstInvalid(h: HostValues, n: number): { index: number; value: number } | null {
  if (h.validUntil === h.length && h.max < n) return null;
  const v = h.values;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (!(x >= 0 && x < n && Math.floor(x) === x)) return { index: i, value: x };
  }
  // Unreachable: a value ≥ n lies before validUntil, or values[validUntil] is invalid.
  return null;
}

/** The record of elements `[from, to)`, or null when they are not known. */
export function sliceValues(h: HostValues, from: number, to: number): HostValues | null {
  if (to <= h.values.length) return recordValues(h.values.subarray(from, to));
  if (from <= h.validUntil && h.validUntil < h.values.length) {
    // Known through the first invalid value, which lies inside the slice.
    return recordValues(h.values.subarray(from, h.validUntil + 1), to - from);
  }
  return null;
}

/** The record of a concatenation, when every part's values are all known. */
export function concatValues(parts: readonly (HostValues | undefined)[]): HostValues | null {
  let n = 0;
  for (const p of parts) {
    if (p === undefined || p.values.length !== p.length) return null;
    n += p.length;
  }
  if (n > MAX_ELEMENTS) return null;
  const all = new Float32Array(n);
  let off = 0;
  for (const p of parts) {
    all.set(p!.values, off);
    off += p!.length;
  }
  return recordValues(all);
}
