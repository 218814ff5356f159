// A stage's accumulated gradients out of and back into its parameters, for
// the data-parallel average across replicas. Used by the model stage
// executor; not exported from the package.

import type { Backend } from "../../tensor/mod.ts";
import type { Parameter } from "../../nn/layer.ts";
import * as ops from "../../tensor/ops.ts";

/** The gradients of `params`, one array each, in order. */
export async function readGradients(params: readonly Parameter[]): Promise<Float32Array[]> {
  return await Promise.all(params.map((p) => p.grad.toArray()));
}

/**
 * Writes `grads` into the gradients of `params` (stage `stage`), after
 * checking every count and size (nothing written on a mismatch).
 */
export function writeGradients(
  backend: Backend,
  stage: number,
  params: readonly Parameter[],
  grads: readonly Float32Array[],
): void {
  if (grads.length !== params.length) {
    throw new RangeError(
      `stage ${stage} has ${params.length} parameters, got ${grads.length} gradients`,
    );
  }
  params.forEach((p, i) => {
    if (!(grads[i] instanceof Float32Array) || grads[i].length !== p.grad.size) {
      throw new RangeError(
        `gradient ${i} of stage ${stage} (${p.name}) must be a Float32Array of ${p.grad.size} ` +
          `values, got ${grads[i] instanceof Float32Array ? grads[i].length : typeof grads[i]}`,
      );
    }
  });
  for (const [i, p] of params.entries()) {
    const t = backend.fromData(grads[i], p.grad.shape);
    try {
      ops.copyInPlace(p.grad, t);
    } finally {
      t.dispose();
    }
  }
}
