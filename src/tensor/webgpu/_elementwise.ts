/**
 * WebGPU glue of the elementwise ops with several operands: broadcasting
 * binary ops (`binary.wgsl`, the op chosen by a named code from
 * `src/tensor/_elementwise_ops.ts`), `where` (`where.wgsl`), and bias add,
 * scale, axpy, fill and dropout.
 *
 * Adding a binary op touches three files, none of them this one: its
 * `const OP_NAME: u32 = code;` and formula in `kernels/binary.wgsl`, its
 * entry in `src/tensor/_elementwise_ops.ts` (code and CPU formula; checked
 * against the WGSL when the kernels load), and its public op in
 * `src/tensor/ops/`.
 *
 * @module
 */

import type { Shape } from "../backend.ts";
import { broadcastPlan } from "../_broadcast.ts";
import { dropoutBase, dropoutKey, dropoutScale, dropoutThreshold } from "../_dropout_hash.ts";
import { BINARY_OPS, type BinaryOp } from "../_elementwise_ops.ts";
import { fmtShape } from "../_validate.ts";
import { shapeSize, type Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, WG } from "./_device.ts";
import { KERNELS } from "./_kernels.ts";

/** Most merged axes the broadcast kernels take (their `Params` hold 2 vec4s). */
const MAX_AXES = 8;

function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

function pad8(v: readonly number[], fill: number): number[] {
  return Array.from({ length: MAX_AXES }, (_, i) => v[i] ?? fill);
}

/**
 * The broadcast layout's `Params` for `inputs` broadcast to `out` (merged
 * shape and strides, padded to 8 axes), or a RangeError past 8 merged axes.
 */
function broadcastParams(
  op: string,
  out: Shape,
  inputs: readonly Shape[],
): { rank: number; shape: number[]; strides: number[][] } {
  const plan = broadcastPlan(out, inputs);
  if (plan.shape.length > MAX_AXES) {
    throw new RangeError(
      `${op}: the WebGPU kernel handles at most ${MAX_AXES} broadcast axes after merging, got ${plan.shape.length} for shapes ${
        inputs.map(fmtShape).join(", ")
      }`,
    );
  }
  return {
    rank: plan.shape.length,
    shape: pad8(plan.shape, 1),
    strides: plan.strides.map((s) => pad8(s, 0)),
  };
}

const ZERO8 = pad8([], 0);

/** `a (op) b` broadcast to `out`; NaN in either operand gives NaN. */
export function binary(core: DeviceCore, op: BinaryOp, a: Tensor, b: Tensor, out: Shape): Tensor {
  const o = core.newTensor(out);
  const n = o.size;
  if (n === 0) return o;
  const OP = BINARY_OPS[op].code;
  if (sameShape(a.shape, out) && sameShape(b.shape, out)) {
    const n4 = ceilDiv(n, 4);
    const params = { n: n4, rank: 0, shape: ZERO8, aStrides: ZERO8, bStrides: ZERO8 };
    core.dispatch(
      KERNELS.binary,
      { OP, BCAST: false },
      params,
      [buf(a), buf(b), buf(o)],
      grid(ceilDiv(n4, WG)),
    );
    return o;
  }
  const { rank, shape, strides: [aStrides, bStrides] } = broadcastParams(op, out, [
    a.shape,
    b.shape,
  ]);
  core.dispatch(
    KERNELS.binary,
    { OP, BCAST: true },
    { n, rank, shape, aStrides, bStrides },
    [buf(a), buf(b), buf(o)],
    grid(ceilDiv(n, WG)),
  );
  return o;
}

/** `cond ≠ 0 ? a : b` broadcast to `out`. */
export function where(core: DeviceCore, cond: Tensor, a: Tensor, b: Tensor, out: Shape): Tensor {
  const o = core.newTensor(out);
  const n = o.size;
  if (n === 0) return o;
  const bufs = [buf(cond), buf(a), buf(b), buf(o)];
  if (sameShape(cond.shape, out) && sameShape(a.shape, out) && sameShape(b.shape, out)) {
    const n4 = ceilDiv(n, 4);
    const params = {
      n: n4,
      rank: 0,
      shape: ZERO8,
      cStrides: ZERO8,
      aStrides: ZERO8,
      bStrides: ZERO8,
    };
    core.dispatch(KERNELS.where, { BCAST: false }, params, bufs, grid(ceilDiv(n4, WG)));
    return o;
  }
  const { rank, shape, strides: [cStrides, aStrides, bStrides] } = broadcastParams(
    "where",
    out,
    [cond.shape, a.shape, b.shape],
  );
  core.dispatch(
    KERNELS.where,
    { BCAST: true },
    { n, rank, shape, cStrides, aStrides, bStrides },
    bufs,
    grid(ceilDiv(n, WG)),
  );
  return o;
}

/** `x + bias` broadcast over rows. */
export function addBias(core: DeviceCore, x: Tensor, bias: Tensor): Tensor {
  const out = core.newTensor(x.shape);
  const cols = x.cols;
  if (x.size === 0 || cols === 0) return out;
  const vec = cols % 4 === 0;
  const units = vec ? x.size / 4 : x.size;
  core.dispatch(
    KERNELS.addBias,
    { VEC: vec },
    { n: units, cols: vec ? cols / 4 : cols },
    [buf(x), buf(bias), buf(out)],
    grid(ceilDiv(units, WG)),
  );
  return out;
}

/** `s * x`. */
export function scale(core: DeviceCore, x: Tensor, s: number): Tensor {
  const out = core.newTensor(x.shape);
  core.vec4(KERNELS.scale, {}, x.size, { s }, [buf(x), buf(out)]);
  return out;
}

/** In place `y += alpha * x`. */
export function axpyInPlace(core: DeviceCore, y: Tensor, alpha: number, x: Tensor): void {
  core.vec4(KERNELS.axpy, {}, y.size, { alpha }, [buf(y), buf(x)]);
}

/** In place fill with `value`. */
export function fillInPlace(core: DeviceCore, x: Tensor, value: number): void {
  core.vec4(KERNELS.fill, {}, x.size, { value }, [buf(x)]);
}

/** A tensor of `shape` filled with `value` (one fill, no clear first). */
export function full(core: DeviceCore, shape: Shape, value: number): Tensor {
  const t = core.newTensor(shape);
  fillInPlace(core, t, value);
  return t;
}

/** In place `x ← s * x`. */
export function scaleInPlace(core: DeviceCore, x: Tensor, s: number): void {
  core.vec4(KERNELS.scaleInPlace, {}, x.size, { s }, [buf(x)]);
}

/** Dropout with the counter-based mask of `_dropout_hash.ts`. */
export function dropout(
  core: DeviceCore,
  x: Tensor,
  p: number,
  seed: number,
  step: number,
  rowOffset: number,
): Tensor {
  const out = core.newTensor(x.shape);
  core.vec4(
    KERNELS.dropout,
    {},
    x.size,
    {
      key: dropoutKey(seed, step),
      base: dropoutBase(rowOffset, shapeSize(x.shape.slice(1))),
      threshold: dropoutThreshold(p),
      scale: dropoutScale(p),
    },
    [buf(x), buf(out)],
  );
  return out;
}
