/**
 * WebGPU glue of the elementwise ops: binary ops (`binary.wgsl`, one kernel
 * with named op codes), bias add, scale, axpy, fill and in-place scale.
 *
 * Adding a binary elementwise op touches three files: its formula and
 * `const OP_NAME: u32 = code;` in `kernels/binary.wgsl`, its code in
 * `BINARY_OP` (`_kernels.ts`, checked against the WGSL at load), and the
 * backend method that calls {@linkcode binary} with its name.
 *
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, WG } from "./_device.ts";
import { BINARY_OP, type BinaryOpName, KERNELS } from "./_kernels.ts";

/** Elementwise `a (op) b`, same shapes. */
export function binary(core: DeviceCore, op: BinaryOpName, a: Tensor, b: Tensor): Tensor {
  const out = core.newTensor(a.shape);
  core.vec4(KERNELS.binary, { OP: BINARY_OP[op] }, a.size, {}, [buf(a), buf(b), buf(out)]);
  return out;
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

/** In place `x ← s * x`. */
export function scaleInPlace(core: DeviceCore, x: Tensor, s: number): void {
  core.vec4(KERNELS.scaleInPlace, {}, x.size, { s }, [buf(x)]);
}
