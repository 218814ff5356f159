// Row geometry shared by the backends' row-wise ops (softmax, layer norm,
// cross-entropy). Not exported from the package.

import type { Tensor } from "./tensor.ts";

/**
 * Rows of `x` for an op over its last dimension: 0 when that dimension is
 * empty (nothing to visit), where `size / cols` would be 0 / 0.
 */
export function rowCount(x: Tensor): number {
  const cols = x.cols;
  return cols === 0 ? 0 : x.size / cols;
}
