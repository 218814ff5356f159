/**
 * WebGPU glue of the fused optimizer updates: AdamW (`adamw.wgsl`) and SGD
 * with or without a momentum buffer (`sgd.wgsl`).
 *
 * @module
 */

import type { AdamWParams, SGDParams } from "../backend.ts";
import type { Tensor } from "../tensor.ts";
import { buf, type DeviceCore } from "./_device.ts";
import { KERNELS } from "./_kernels.ts";

/** AdamW with bias correction and decoupled weight decay. */
export function adamwInPlace(
  core: DeviceCore,
  param: Tensor,
  grad: Tensor,
  m: Tensor,
  v: Tensor,
  { lr, beta1, beta2, eps, weightDecay, step }: AdamWParams,
): void {
  core.vec4(
    KERNELS.adamw,
    {},
    param.size,
    {
      lr,
      beta1,
      oneMinusBeta1: 1 - beta1,
      beta2,
      oneMinusBeta2: 1 - beta2,
      eps,
      weightDecay,
      // Bias corrections in f64 on the host.
      bc1: 1 - Math.pow(beta1, step),
      bc2: 1 - Math.pow(beta2, step),
    },
    [buf(param), buf(grad), buf(m), buf(v)],
  );
}

/** SGD with optional momentum buffer and L2 weight decay, in one pass. */
export function sgdInPlace(
  core: DeviceCore,
  param: Tensor,
  grad: Tensor,
  buffer: Tensor | null,
  hp: SGDParams,
): void {
  const p = { lr: hp.lr, momentum: hp.momentum, weightDecay: hp.weightDecay };
  if (buffer === null) {
    core.vec4(KERNELS.sgdPlain, { MOMENTUM: false }, param.size, p, [buf(param), buf(grad)]);
  } else {
    core.vec4(KERNELS.sgd, { MOMENTUM: true }, param.size, p, [
      buf(param),
      buf(grad),
      buf(buffer),
    ]);
  }
}
