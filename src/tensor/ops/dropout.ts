/**
 * Dropout with a counter-based mask: which elements are dropped depends on
 * the seed, the training step and each element's index in the full batch
 * only, identically on every backend (bit for bit), so a micro-batch run on
 * any rank drops what a single-device run of the whole batch drops.
 *
 * @module
 */

import { checkTensors, describe } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * Options of {@linkcode dropout}.
 *
 * @example
 * ```ts
 * import type { DropoutOpOptions } from "@conveyor/core/tensor";
 * // Step 12, a micro-batch starting at row 32 of the full batch.
 * const o: DropoutOpOptions = { p: 0.1, seed: 42, step: 12, rowOffset: 32 };
 * console.log(o.p);
 * ```
 */
export interface DropoutOpOptions {
  /** Drop probability in [0, 1). */
  readonly p: number;
  /** Seed of the mask, an integer in [0, 2^32). */
  readonly seed: number;
  /** Training step (a fresh mask per step), an integer in [0, 2^32); default 0. */
  readonly step?: number;
  /**
   * Index in the full batch of `x`'s first row (dimension 0), when `x` is
   * a micro-batch; default 0. Element indices beyond 2^32 wrap.
   */
  readonly rowOffset?: number;
}

function u32(op: string, name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 0xffffffff) {
    throw new RangeError(`${op}: ${name} must be an integer in [0, 2^32), got ${describe(v)}`);
  }
  return v;
}

/**
 * Dropout: each element is dropped (set to 0) with probability `p` and
 * kept elements are scaled by `1 / (1 − p)`. The mask is a hash of
 * (`seed`, `step`, global flat index), where the global index of element
 * `i` of `x` is `rowOffset · (elements per row of x) + i`, so splitting a
 * batch into micro-batches (each with its `rowOffset`) gives the same mask
 * as the whole batch. The gradient is the same op applied to `dy` with the
 * same options. NaN stays NaN, dropped or not.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = ops.ones(be, [4, 3]);
 * const whole = await ops.dropout(x, { p: 0.5, seed: 7, step: 1 }).toArray();
 * assert.ok(whole.every((v) => v === 0 || v === 2)); // kept ones scaled by 1 / (1 - p)
 * // Rows 2..3 as their own micro-batch drop the same elements.
 * const tail = ops.dropout(ops.ones(be, [2, 3]), { p: 0.5, seed: 7, step: 1, rowOffset: 2 });
 * assert.deepEqual([...await tail.toArray()], [...whole.subarray(6)]);
 * ```
 */
export function dropout(x: Tensor, opts: DropoutOpOptions): Tensor {
  const op = "dropout";
  const be = checkTensors(op, { x });
  if (opts === null || typeof opts !== "object") {
    throw new TypeError(
      `${op}: opts must be an object { p, seed, step?, rowOffset? }, got ${describe(opts)}`,
    );
  }
  const p = opts.p;
  if (typeof p !== "number" || !(p >= 0 && p < 1)) {
    throw new RangeError(`${op}: p must be a number in [0, 1), got ${describe(p)}`);
  }
  const seed = u32(op, "seed", opts.seed);
  const step = u32(op, "step", opts.step ?? 0);
  const rowOffset = opts.rowOffset ?? 0;
  if (typeof rowOffset !== "number" || !Number.isSafeInteger(rowOffset) || rowOffset < 0) {
    throw new RangeError(
      `${op}: rowOffset must be a non-negative integer, got ${describe(rowOffset)}`,
    );
  }
  return be.dropout(x, p, seed, step, rowOffset);
}
