/**
 * WebGPU glue of the reductions: column sums (`sum_rows.wgsl`, staged until
 * one row is left) and full sums / sums of squares (`reduce.wgsl`, staged
 * until one value is left).
 *
 * @module
 */

import { rowCount } from "../_rows.ts";
import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, MAX_GROUPS } from "./_device.ts";
import { KERNELS } from "./_kernels.ts";

// Column-sum kernels: invocations per workgroup, one column each.
const COL_WG = 64;
/** Rows per workgroup in the column-sum stages. */
export const SUM_CHUNK = 64;
// Invocations and floats per invocation in the reduce stages (reduce.wgsl).
const REDUCE_WG = 64;
const REDUCE_PER = 16;

/** Workgroups along x for `cols` columns, one column per invocation. */
export function columnGroups(cols: number): number {
  const g = ceilDiv(cols, COL_WG);
  if (g > MAX_GROUPS) {
    throw new RangeError(
      `column reductions on WebGPU support at most ${MAX_GROUPS * COL_WG} columns, got ${cols}`,
    );
  }
  return g;
}

/** Records the sum of `rows` rows of `cols` floats from `src` into `dst[0 .. cols)`. */
export function columnSums(
  core: DeviceCore,
  src: GPUBuffer,
  rows: number,
  cols: number,
  dst: GPUBuffer,
): void {
  const groupsX = columnGroups(cols);
  let cur = src, curRows = rows;
  for (;;) {
    const chunk = Math.max(SUM_CHUNK, ceilDiv(curRows, MAX_GROUPS));
    const chunks = ceilDiv(curRows, chunk);
    const next = chunks === 1 ? dst : core.temp(chunks * cols * 4);
    core.dispatch(KERNELS.sumRows, {}, { rows: curRows, cols, chunk }, [cur, next], [
      groupsX,
      chunks,
      1,
    ]);
    if (cur !== src) core.pool.release(cur);
    if (chunks === 1) return;
    cur = next;
    curRows = chunks;
  }
}

/** Column sums `[..., N]` → `[N]`. */
export function sumRows(core: DeviceCore, x: Tensor): Tensor {
  const cols = x.cols, rows = rowCount(x);
  const out = core.newTensor([cols]);
  if (cols === 0) return out;
  if (rows === 0) {
    core.clear(buf(out), cols);
    return out;
  }
  columnSums(core, buf(x), rows, cols, buf(out));
  return out;
}

/** Sum (or sum of squares, with `square`) of all elements, `[1]`. */
export function reduce(core: DeviceCore, x: Tensor, square: boolean): Tensor {
  const out = core.newTensor([1]);
  let n = x.size;
  if (n === 0) {
    core.clear(buf(out), 1);
    return out;
  }
  let cur = buf(x), first = true;
  for (;;) {
    const groups = ceilDiv(n, REDUCE_WG * REDUCE_PER);
    const next = groups === 1 ? buf(out) : core.temp(groups * 4);
    core.dispatch(KERNELS.reduce, { SQUARE: square && first }, { n }, [cur, next], grid(groups));
    if (!first) core.pool.release(cur);
    if (groups === 1) return out;
    cur = next;
    n = groups;
    first = false;
  }
}
