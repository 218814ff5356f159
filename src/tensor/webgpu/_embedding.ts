/**
 * WebGPU glue of the embedding: row gather (`embedding.wgsl`) and its
 * scatter-add gradient (`embedding_backward.wgsl`).
 *
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, WG } from "./_device.ts";
import { checkOnDevice } from "./_index_check.ts";
import { KERNELS } from "./_kernels.ts";

/** Row gather: `table` `[V, C]`, `ids` of any shape → `[...ids.shape, C]`. */
export function embedding(core: DeviceCore, table: Tensor, ids: Tensor): Tensor {
  const [V, C] = table.shape;
  checkOnDevice(core, "embedding", "id", ids, V);
  const out = core.newTensor([...ids.shape, C]);
  if (out.size === 0) return out;
  if (V === 0) {
    // Every id is out of range of an empty table.
    core.vec4(KERNELS.fill, {}, out.size, { value: NaN }, [buf(out)]);
    return out;
  }
  const vec = C % 4 === 0;
  const units = vec ? out.size / 4 : out.size;
  core.dispatch(
    KERNELS.embedding,
    { VEC: vec },
    { n: units, cols: vec ? C / 4 : C, vocab: V },
    [buf(table), buf(ids), buf(out)],
    grid(ceilDiv(units, WG)),
  );
  return out;
}

/** Scatter-add of `dy` rows into `dTable`. */
export function embeddingBackwardInPlace(
  core: DeviceCore,
  dTable: Tensor,
  ids: Tensor,
  dy: Tensor,
): void {
  const [V, C] = dTable.shape;
  checkOnDevice(core, "embeddingBackwardInPlace", "id", ids, V);
  if (dTable.size === 0 || ids.size === 0) return;
  const vec = C % 4 === 0;
  const units = vec ? dTable.size / 4 : dTable.size;
  core.dispatch(
    KERNELS.embeddingBackward,
    { VEC: vec },
    { n: units, cols: vec ? C / 4 : C, count: ids.size },
    [buf(dTable), buf(ids), buf(dy)],
    grid(ceilDiv(units, WG)),
  );
}
