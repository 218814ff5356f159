/**
 * WebGPU glue of the reductions: column sums (`sum_rows.wgsl`, staged until
 * one row is left) and full sums / sums of squares (`reduce.wgsl`, staged
 * until one value is left), and the sum to a broadcast shape.
 *
 * @module
 */

import type { Shape } from "../backend.ts";
import { rowCount } from "../_rows.ts";
import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, MAX_GROUPS } from "./_device.ts";
import { KERNELS } from "./_kernels.ts";
import { permute } from "./_layout.ts";

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

/**
 * Sum of `x` over the axes where `shape` (right-aligned) has extent 1:
 * the summed axes are moved first (one permute, skipped when they already
 * lead), then the column sums above reduce them.
 */
export function sumToShape(core: DeviceCore, x: Tensor, shape: Shape): Tensor {
  const out = core.newTensor(shape);
  if (out.size === 0) return out;
  if (x.size === 0) {
    core.clear(buf(out), out.size);
    return out;
  }
  const r = x.shape.length, off = r - shape.length;
  const summed: number[] = [], kept: number[] = [];
  for (let d = 0; d < r; d++) {
    const t = d >= off ? shape[d - off] : 1;
    (t === 1 && x.shape[d] !== 1 ? summed : kept).push(d);
  }
  if (summed.length === 0) {
    core.copyBytes(buf(x), 0, buf(out), 0, x.size * 4);
    return out;
  }
  const perm = [...summed, ...kept];
  const moved = perm.filter((d) => x.shape[d] !== 1);
  const inOrder = moved.every((d, i) => i === 0 || d > moved[i - 1]);
  const t = inOrder ? null : permute(core, x, perm);
  columnSums(core, buf(t ?? x), x.size / out.size, out.size, buf(out));
  t?.dispose();
  return out;
}
