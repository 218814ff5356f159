/**
 * Argument checks shared by the backends' storage methods (`fromData`,
 * `zeros`), so every backend refuses bad input with the same errors.
 *
 * @module
 */

import { formatShape } from "../text/describe.ts";
import type { Shape } from "./backend.ts";
import { checkShape, shapeSize } from "./tensor.ts";

/** Formats a shape for error messages (long ones cut). */
export const fmtShape: (shape: readonly unknown[]) => string = formatShape;

/**
 * Checks the arguments of `backend.fromData`: `data` is a Float32Array, the
 * shape holds non-negative integers, and the lengths agree.
 */
export function checkFromData(data: Float32Array, shape: Shape): void {
  if (!(data instanceof Float32Array)) {
    const got = data === null ? "null" : (data as object)?.constructor?.name ?? typeof data;
    throw new TypeError(`fromData: data must be a Float32Array, got ${got}`);
  }
  checkShape(shape, "fromData: shape");
  const n = shapeSize(shape);
  if (data.length !== n) {
    throw new RangeError(
      `fromData: data length ${data.length} does not match shape ${
        fmtShape(shape)
      } (${n} elements)`,
    );
  }
}

/** Checks the shape given to `backend.zeros`. */
export function checkZeros(shape: Shape): void {
  checkShape(shape, "zeros: shape");
}

/**
 * The first value of `values` that is not an integer in [0, n), with its
 * position, or null: the check behind every integer input (ids, targets).
 */
export function firstInvalidIndex(
  values: Float32Array,
  n: number,
): { index: number; value: number } | null {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!(v >= 0 && v < n && Math.floor(v) === v)) return { index: i, value: v };
  }
  return null;
}
