// The backward steps every layer container shares: what I hands back, and B
// as I then W.

import type { Tensor } from "../tensor/tensor.ts";
import type { BackwardOptions, InputGrad, Layer, StateKey } from "./layer.ts";

/**
 * What I hands back: `dx`, or `null` when the caller needs no input gradient
 * (a `dx` computed anyway is disposed); an Error naming `source` when `dx`
 * is needed and `source` gave none.
 */
export function inputGradResult(need: boolean, dx: Tensor | null, source: string): Tensor | null {
  if (!need) {
    dx?.dispose();
    return null;
  }
  if (dx === null) throw new Error(`${source} returned no dx`);
  return dx;
}

/** B, the full backward of any layer: I then W under `key`, with I's options. */
export function inputThenWeight<O extends BackwardOptions | undefined>(
  layer: Layer,
  dy: Tensor,
  key: StateKey,
  opts?: O,
): InputGrad<O> {
  const dx = layer.backwardInput(dy, key, opts);
  layer.backwardWeight(key);
  return dx;
}
