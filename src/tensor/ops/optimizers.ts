/**
 * Fused optimizer updates and the in-place copy they use.
 *
 * @module
 */

import type { AdamWParams, SGDParams } from "../backend.ts";
import { aliases, checkFinite, checkSameShape, checkTensors, describe } from "./_check.ts";
import type { Tensor } from "../tensor.ts";

/**
 * In place: `dst` becomes a copy of `src` (same shapes; on WebGPU one
 * buffer-to-buffer copy). Copying a tensor onto itself (or onto a view of
 * its storage) changes nothing.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const dst = be.zeros([2]);
 * ops.copyInPlace(dst, be.fromData(new Float32Array([1, 2]), [2]));
 * console.log(await dst.toArray()); // Float32Array [1, 2]
 * ```
 */
export function copyInPlace(dst: Tensor, src: Tensor): void {
  const be = checkTensors("copyInPlace", { dst, src });
  checkSameShape("copyInPlace", "dst", dst, "src", src);
  // Views share all of their storage, so an aliased copy is the identity
  // (and a GPU cannot copy a buffer onto itself).
  if (aliases(dst, src)) return;
  be.copyInPlace(dst, src);
}

/**
 * In place AdamW update with bias correction and decoupled weight decay:
 * `m = β1 m + (1-β1) g`, `v = β2 v + (1-β2) g²`, then
 * `p -= lr * (m̂ / (sqrt(v̂) + eps) + weightDecay * p)`.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const p = be.fromData(new Float32Array([1]), [1]);
 * const g = be.fromData(new Float32Array([1]), [1]);
 * const hp = { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1 };
 * ops.adamwInPlace(p, g, be.zeros([1]), be.zeros([1]), hp);
 * console.log(await p.toArray()); // ≈ [0.9]
 * ```
 */
export function adamwInPlace(
  param: Tensor,
  grad: Tensor,
  m: Tensor,
  v: Tensor,
  hp: AdamWParams,
): void {
  const op = "adamwInPlace";
  const be = checkTensors(op, { param, grad, m, v });
  checkSameShape(op, "param", param, "grad", grad);
  checkSameShape(op, "param", param, "m", m);
  checkSameShape(op, "param", param, "v", v);
  const named: [string, Tensor][] = [["param", param], ["grad", grad], ["m", m], ["v", v]];
  for (let i = 0; i < named.length; i++) {
    for (let j = i + 1; j < named.length; j++) {
      if (aliases(named[i][1], named[j][1])) {
        throw new RangeError(`${op}: ${named[i][0]} and ${named[j][0]} must not share storage`);
      }
    }
  }
  if (hp === null || typeof hp !== "object") {
    throw new TypeError(`${op}: hp must be an AdamWParams object, got ${describe(hp)}`);
  }
  const lr = checkFinite(op, "hp.lr", hp.lr);
  if (lr < 0) throw new RangeError(`${op}: hp.lr must be non-negative, got ${lr}`);
  for (const k of ["beta1", "beta2"] as const) {
    const b = checkFinite(op, `hp.${k}`, hp[k]);
    if (b < 0 || b >= 1) throw new RangeError(`${op}: hp.${k} must be in [0, 1), got ${b}`);
  }
  const eps = checkFinite(op, "hp.eps", hp.eps);
  if (eps <= 0) throw new RangeError(`${op}: hp.eps must be positive, got ${eps}`);
  const wd = checkFinite(op, "hp.weightDecay", hp.weightDecay);
  if (wd < 0) throw new RangeError(`${op}: hp.weightDecay must be non-negative, got ${wd}`);
  const step = checkFinite(op, "hp.step", hp.step);
  if (!Number.isInteger(step) || step < 1) {
    throw new RangeError(`${op}: hp.step must be an integer >= 1, got ${step}`);
  }
  be.adamwInPlace(param, grad, m, v, hp);
}

/**
 * In place SGD update in one pass, as PyTorch's `SGD` without dampening or
 * Nesterov: `d = g + weightDecay·p`; with a momentum buffer `buf` (same
 * shape, updated too) `buf ← momentum·buf + d` and `d = buf`; then
 * `p ← p − lr·d`. A zero-filled `buf` gives PyTorch's first step
 * (`buf = d`). Pass `null` for `buf` when `momentum` is 0.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const p = be.fromData(new Float32Array([1]), [1]);
 * const g = be.fromData(new Float32Array([2]), [1]);
 * ops.sgdInPlace(p, g, be.zeros([1]), { lr: 0.1, momentum: 0.9, weightDecay: 0 });
 * console.log(await p.toArray()); // ≈ [0.8]
 * ```
 */
export function sgdInPlace(
  param: Tensor,
  grad: Tensor,
  buf: Tensor | null,
  hp: SGDParams,
): void {
  const op = "sgdInPlace";
  const named: [string, Tensor][] = [["param", param], ["grad", grad]];
  if (buf !== null) named.push(["buf", buf]);
  const be = checkTensors(op, Object.fromEntries(named));
  checkSameShape(op, "param", param, "grad", grad);
  if (buf !== null) checkSameShape(op, "param", param, "buf", buf);
  for (let i = 0; i < named.length; i++) {
    for (let j = i + 1; j < named.length; j++) {
      if (aliases(named[i][1], named[j][1])) {
        throw new RangeError(`${op}: ${named[i][0]} and ${named[j][0]} must not share storage`);
      }
    }
  }
  if (hp === null || typeof hp !== "object") {
    throw new TypeError(`${op}: hp must be an SGDParams object, got ${describe(hp)}`);
  }
  const lr = checkFinite(op, "hp.lr", hp.lr);
  if (lr < 0) throw new RangeError(`${op}: hp.lr must be non-negative, got ${lr}`);
  const mu = checkFinite(op, "hp.momentum", hp.momentum);
  if (mu < 0 || mu >= 1) throw new RangeError(`${op}: hp.momentum must be in [0, 1), got ${mu}`);
  if (buf === null && mu !== 0) {
    throw new RangeError(`${op}: hp.momentum ${mu} needs a momentum buffer, got buf null`);
  }
  const wd = checkFinite(op, "hp.weightDecay", hp.weightDecay);
  if (wd < 0) throw new RangeError(`${op}: hp.weightDecay must be non-negative, got ${wd}`);
  be.sgdInPlace(param, grad, buf, hp);
}
