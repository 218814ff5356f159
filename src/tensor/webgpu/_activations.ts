/**
 * WebGPU glue of the activations and their gradients (`activation.wgsl`,
 * `activation_backward.wgsl`: one kernel each, the activation chosen by a
 * named op code).
 *
 * Adding an activation touches three files: `const ACT_NAME: u32 = code;`
 * and its branch in `kernels/activation.wgsl` (and
 * `activation_backward.wgsl` for its gradient), its code in `ACTIVATION`
 * (`_kernels.ts`, checked against the WGSL at load), and the backend method
 * that calls {@linkcode activation} with its name.
 *
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { buf, type DeviceCore } from "./_device.ts";
import { ACTIVATION, type ActivationName, KERNELS } from "./_kernels.ts";

/** `act(x)`, elementwise. */
export function activation(core: DeviceCore, act: ActivationName, x: Tensor): Tensor {
  const out = core.newTensor(x.shape);
  core.vec4(KERNELS.activation, { ACT: ACTIVATION[act] }, x.size, {}, [buf(x), buf(out)]);
  return out;
}

/**
 * `dy * act'(·)` from `v`: the forward input for relu and gelu, the forward
 * output for tanh.
 */
export function activationBackward(
  core: DeviceCore,
  act: ActivationName,
  v: Tensor,
  dy: Tensor,
): Tensor {
  const out = core.newTensor(v.shape);
  core.vec4(KERNELS.activationBackward, { ACT: ACTIVATION[act] }, v.size, {}, [
    buf(v),
    buf(dy),
    buf(out),
  ]);
  return out;
}
