/**
 * WebGPU glue of the layout ops: copies, row slices and concatenations
 * (buffer-to-buffer copies, no kernel), axis permutation (`permute.wgsl`)
 * and the strided 2-D copy the matmul uses to pad, transpose and crop
 * operands (`copy2d.wgsl`).
 *
 * @module
 */

import type { Shape } from "../backend.ts";
import { fmtShape } from "../_validate.ts";
import { shapeSize, type Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, WG } from "./_device.ts";
import { concatValues, sliceValues } from "./_host_values.ts";
import { KERNELS } from "./_kernels.ts";

/** A fresh copy of `x`: one buffer copy. */
export function copy(core: DeviceCore, x: Tensor): Tensor {
  const out = core.newTensor(x.shape);
  core.copyBytes(buf(x), 0, buf(out), 0, x.size * 4);
  core.setHostValues(out, core.hostValues(x) ?? null);
  return out;
}

/** `dst ← src`: one buffer copy, no dispatch. */
export function copyInPlace(core: DeviceCore, dst: Tensor, src: Tensor): void {
  core.copyBytes(buf(src), 0, buf(dst), 0, src.size * 4);
  core.setHostValues(dst, core.hostValues(src) ?? null);
}

/** Copy of rows `[start, end)` along dimension 0. */
export function sliceRows(core: DeviceCore, x: Tensor, start: number, end: number): Tensor {
  const inner = shapeSize(x.shape.slice(1));
  const out = core.newTensor([end - start, ...x.shape.slice(1)]);
  core.copyBytes(buf(x), start * inner * 4, buf(out), 0, out.size * 4);
  const h = core.hostValues(x);
  if (h !== undefined) core.setHostValues(out, sliceValues(h, start * inner, end * inner));
  return out;
}

/** Concatenation along dimension 0. */
export function concatRows(core: DeviceCore, parts: readonly Tensor[]): Tensor {
  let rows = 0;
  for (const p of parts) rows += p.shape[0];
  const out = core.newTensor([rows, ...parts[0].shape.slice(1)]);
  let off = 0;
  for (const p of parts) {
    core.copyBytes(buf(p), 0, buf(out), off, p.size * 4);
    off += p.size * 4;
  }
  core.setHostValues(out, concatValues(parts.map((p) => core.hostValues(p))));
  return out;
}

/** Most axes `permute.wgsl` takes after merging (its `Params` hold 2 vec4s). */
const MAX_AXES = 8;

/** Axis permutation (a copy). */
export function permute(core: DeviceCore, x: Tensor, perm: readonly number[]): Tensor {
  const out = core.newTensor(perm.map((p) => x.shape[p]));
  if (out.size === 0) return out;
  const { shape, strides } = mergeAxes(x.shape, perm);
  if (shape.length <= 1) {
    // Only one axis of extent > 1 moves: the data order is unchanged.
    core.copyBytes(buf(x), 0, buf(out), 0, x.size * 4);
    return out;
  }
  if (shape.length > MAX_AXES) {
    throw new RangeError(
      `permute: the WebGPU kernel handles at most ${MAX_AXES} axes after merging adjacent ones, got ${shape.length} for shape ${
        fmtShape(x.shape)
      } and perm [${perm.join(", ")}]`,
    );
  }
  core.dispatch(
    KERNELS.permute,
    {},
    {
      n: out.size,
      rank: shape.length,
      shape: Array.from({ length: MAX_AXES }, (_, i) => shape[i] ?? 1),
      strides: Array.from({ length: MAX_AXES }, (_, i) => strides[i] ?? 0),
    },
    [buf(x), buf(out)],
    grid(ceilDiv(out.size, WG)),
  );
  return out;
}

/**
 * Output shape and input strides of a permutation after dropping axes of
 * extent 1 and merging output axes whose input axes are adjacent and in order.
 */
export function mergeAxes(
  shape: Shape,
  perm: readonly number[],
): { shape: number[]; strides: number[] } {
  const inStrides = new Array<number>(shape.length);
  let s = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    inStrides[d] = s;
    s *= shape[d];
  }
  const outShape: number[] = [];
  const strides: number[] = [];
  let last = -2;
  for (const p of perm) {
    if (shape[p] === 1) continue;
    if (p === last + 1 && outShape.length > 0) {
      outShape[outShape.length - 1] *= shape[p];
      strides[strides.length - 1] = inStrides[p];
    } else {
      outShape.push(shape[p]);
      strides.push(inStrides[p]);
    }
    last = p;
  }
  return { shape: outShape, strides };
}

/** A strided `[batch, rows, cols]` view of a buffer (see {@linkcode stridedCopy}). */
export interface StridedView {
  readonly batch: number;
  readonly rows: number;
  readonly cols: number;
  /** Element (r, c) of a batch entry sits at r·rowStride + c·colStride. */
  readonly rowStride: number;
  readonly colStride: number;
  /** Floats between batch entries. */
  readonly batchStride: number;
}

/**
 * Records a contiguous `[view.batch, outRows, outCols]` copy of `view` of
 * `src` into `dst`, zero-padded past the view's rows / cols (or cropped).
 */
export function stridedCopy(
  core: DeviceCore,
  src: GPUBuffer,
  view: StridedView,
  outRows: number,
  outCols: number,
  dst: GPUBuffer,
): void {
  const n = view.batch * outRows * outCols;
  core.dispatch(
    KERNELS.copy2d,
    {},
    {
      n,
      rows: outRows,
      cols: outCols,
      inRows: view.rows,
      inCols: view.cols,
      rowStride: view.rowStride,
      colStride: view.colStride,
      inStride: view.batchStride,
    },
    [src, dst],
    grid(ceilDiv(n, WG)),
  );
}
