/**
 * CPU reference (exact mode) of the fused optimizer steps, in f64 per
 * element, stored as f32. The fast mode's AdamW (`kernels/wasm/`) is
 * tested against it.
 *
 * @module
 */

import type { AdamWParams, SGDParams } from "../backend.ts";

/** AdamW with bias correction and decoupled weight decay, in place. */
export function adamwInto(
  P: Float32Array,
  G: Float32Array,
  Mm: Float32Array,
  Vv: Float32Array,
  hp: AdamWParams,
): void {
  const { lr, beta1, beta2, eps, weightDecay, step } = hp;
  const bc1 = 1 - Math.pow(beta1, step), bc2 = 1 - Math.pow(beta2, step);
  for (let i = 0; i < P.length; i++) {
    const g = G[i];
    const mi = beta1 * Mm[i] + (1 - beta1) * g;
    const vi = beta2 * Vv[i] + (1 - beta2) * g * g;
    Mm[i] = mi;
    Vv[i] = vi;
    const p = P[i];
    P[i] = p - lr * ((mi / bc1) / (Math.sqrt(vi / bc2) + eps) + weightDecay * p);
  }
}

/** SGD with optional momentum buffer and L2 weight decay, in place. */
export function sgdInto(
  P: Float32Array,
  G: Float32Array,
  Bf: Float32Array | null,
  hp: SGDParams,
): void {
  const { lr, momentum, weightDecay } = hp;
  if (Bf === null) {
    for (let i = 0; i < P.length; i++) P[i] -= lr * (G[i] + weightDecay * P[i]);
    return;
  }
  for (let i = 0; i < P.length; i++) {
    // The stored (f32) buffer drives the step, as in the unfused update.
    Bf[i] = momentum * Bf[i] + (G[i] + weightDecay * P[i]);
    P[i] -= lr * Bf[i];
  }
}
