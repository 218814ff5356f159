/**
 * WebGPU glue of the losses: softmax cross-entropy forward (one workgroup
 * per row, `cross_entropy.wgsl`) and its input gradient
 * (`cross_entropy_backward.wgsl`).
 *
 * @module
 */

import type { CrossEntropyResult } from "../backend.ts";
import { rowCount } from "../_rows.ts";
import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, WG } from "./_device.ts";
import { checkOnDevice } from "./_index_check.ts";
import { KERNELS } from "./_kernels.ts";

/** Softmax cross-entropy forward. */
export function crossEntropy(
  core: DeviceCore,
  logits: Tensor,
  targets: Tensor,
): CrossEntropyResult {
  checkOnDevice(core, "crossEntropy", "target", targets, logits.cols);
  const probs = core.newTensor(logits.shape);
  const loss = core.newTensor([rowCount(logits)]);
  core.perRow(KERNELS.crossEntropy, {}, logits, {}, [
    buf(logits),
    buf(targets),
    buf(loss),
    buf(probs),
  ]);
  return { loss, probs };
}

/** `(probs - onehot(targets)) * scale`. */
export function crossEntropyBackward(
  core: DeviceCore,
  probs: Tensor,
  targets: Tensor,
  scale: number,
): Tensor {
  checkOnDevice(core, "crossEntropyBackward", "target", targets, probs.cols);
  const out = core.newTensor(probs.shape);
  const n = probs.size;
  if (n > 0) {
    core.dispatch(
      KERNELS.crossEntropyBackward,
      {},
      { n, cols: probs.cols, scale },
      [buf(probs), buf(targets), buf(out)],
      grid(ceilDiv(n, WG)),
    );
  }
  return out;
}
