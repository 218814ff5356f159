/**
 * WebGPU glue of the unary elementwise ops and their input gradients
 * (`unary.wgsl`, `unary_backward.wgsl`: one kernel each, the op chosen by a
 * named code from the shared table in `src/tensor/_elementwise_ops.ts`).
 *
 * Adding a unary op touches three files, none of them this one: its
 * `const OP_NAME: u32 = code;` and formula in `kernels/unary.wgsl` (and
 * `unary_backward.wgsl` for its gradient), its entry in
 * `src/tensor/_elementwise_ops.ts` (code and CPU formula; checked against
 * the WGSL when the kernels load), and its public op in `src/tensor/ops/`.
 *
 * @module
 */

import { UNARY_GRAD_OPS, UNARY_OPS, type UnaryGradOp, type UnaryOp } from "../_elementwise_ops.ts";
import type { Tensor } from "../tensor.ts";
import { buf, type DeviceCore } from "./_device.ts";
import { KERNELS } from "./_kernels.ts";

/** `f(x)` elementwise; NaN kept. */
export function unary(core: DeviceCore, op: UnaryOp, x: Tensor): Tensor {
  const out = core.newTensor(x.shape);
  core.vec4(KERNELS.unary, { OP: UNARY_OPS[op].code }, x.size, {}, [buf(x), buf(out)]);
  return out;
}

/** `dy · f'(·)` from `v` (x or y, see `UnaryGradOp`); NaN in either gives NaN. */
export function unaryBackward(core: DeviceCore, op: UnaryGradOp, v: Tensor, dy: Tensor): Tensor {
  const out = core.newTensor(v.shape);
  core.vec4(KERNELS.unaryBackward, { OP: UNARY_GRAD_OPS[op].code }, v.size, {}, [
    buf(v),
    buf(dy),
    buf(out),
  ]);
  return out;
}
