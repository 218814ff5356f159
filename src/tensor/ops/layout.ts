/**
 * Layout ops: row slices, concatenation and axis permutation.
 *
 * @module
 */

import { checkRank, checkTensors, describe, fmtShape, sameShape } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * Copy of rows `[start, end)` along dimension 0 (micro-batches are row ranges).
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2]);
 * console.log(await ops.sliceRows(x, 1, 3).toArray()); // Float32Array [3, 4, 5, 6]
 * ```
 */
export function sliceRows(x: Tensor, start: number, end: number): Tensor {
  const op = "sliceRows";
  const be = checkTensors(op, { x });
  checkRank(op, "x", x, 1);
  const n = x.shape[0];
  if (
    !Number.isInteger(start) || !Number.isInteger(end) || start < 0 || start > end || end > n
  ) {
    throw new RangeError(
      `${op}: need integers 0 <= start <= end <= ${n} (dimension 0 of x ${
        fmtShape(x.shape)
      }), got start ${start}, end ${end}`,
    );
  }
  return be.sliceRows(x, start, end);
}

/**
 * Concatenation along dimension 0; all other dimensions must match.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2]), [1, 2]);
 * console.log((ops.concatRows([a, a, a])).shape); // [3, 2]
 * ```
 */
export function concatRows(parts: readonly Tensor[]): Tensor {
  const op = "concatRows";
  if (!Array.isArray(parts)) {
    throw new TypeError(`${op}: parts must be an array of tensors, got ${describe(parts)}`);
  }
  if (parts.length === 0) throw new RangeError(`${op}: parts must not be empty, got 0 tensors`);
  const named: Record<string, unknown> = {};
  parts.forEach((p, i) => (named[`parts[${i}]`] = p));
  const be = checkTensors(op, named);
  const first = parts[0];
  checkRank(op, "parts[0]", first, 1);
  const rest = first.shape.slice(1);
  for (let i = 1; i < parts.length; i++) {
    const s = parts[i].shape;
    if (s.length !== first.shape.length || !sameShape(s.slice(1), rest)) {
      throw new RangeError(
        `${op}: parts[${i}] has shape ${fmtShape(s)} but parts[0] has ${
          fmtShape(first.shape)
        }; all dimensions but the first must match`,
      );
    }
  }
  return be.concatRows(parts);
}

/** Highest rank {@linkcode permute} accepts. */
export const MAX_PERMUTE_RANK = 6;

/**
 * Axis permutation (a copy): output dimension `i` is input dimension
 * `perm[i]`. Ranks up to {@linkcode MAX_PERMUTE_RANK}.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * console.log(await ops.permute(x, [1, 0]).toArray()); // [1, 4, 2, 5, 3, 6]
 * ```
 */
export function permute(x: Tensor, perm: readonly number[]): Tensor {
  const op = "permute";
  const be = checkTensors(op, { x });
  if (!Array.isArray(perm)) {
    throw new TypeError(`${op}: perm must be an array, got ${describe(perm)}`);
  }
  const rank = x.shape.length;
  if (rank > MAX_PERMUTE_RANK) {
    throw new RangeError(
      `${op}: rank must be at most ${MAX_PERMUTE_RANK}, got x of shape ${fmtShape(x.shape)}`,
    );
  }
  const seen = new Set<number>();
  const bad = perm.length !== rank ||
    perm.some((p) => !Number.isInteger(p) || p < 0 || p >= rank || seen.size === seen.add(p).size);
  if (bad) {
    throw new RangeError(
      `${op}: perm must be a permutation of 0..${rank - 1} (x has shape ${
        fmtShape(x.shape)
      }), got [${perm.join(", ")}]`,
    );
  }
  return be.permute(x, perm);
}
