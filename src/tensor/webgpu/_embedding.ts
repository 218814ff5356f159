/**
 * WebGPU glue of the embedding: row gather (`embedding.wgsl`) and its
 * scatter-add gradient, in two variants that both add each table row's
 * updates in position order, as the CPU reference does, so both equal it
 * bit for bit (no float atomics, whose order would vary from run to run):
 * - sorted (`embedding_keys.wgsl`, `bitonic_sort.wgsl`,
 *   `embedding_backward.wgsl`): the ids are sorted by (id, position) and
 *   the first position of each id's run adds the run: O(N · C) after an
 *   O(N log² N) sort of N keys. On GPUs the short sort distances run in
 *   workgroup memory (about log²(N / 512) / 2 + log(N / 512) + 3
 *   dispatches); on CPU adapters, where workgroup barriers are slow (3x on
 *   llvmpipe), every distance is its own dispatch (log²(N) / 2 of them);
 * - scan (`embedding_backward_scan.wgsl`): every table entry scans all ids,
 *   O(V · C · N) in one dispatch; faster only for tiny V · N.
 * The since-removed `bench/embedding_backward.ts` compared them (`git log`).
 *
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, WG } from "./_device.ts";
import { checkOnDevice } from "./_index_check.ts";
import { KERNELS } from "./_kernels.ts";

/** Keys sorted per workgroup in workgroup memory (`BLOCK` of bitonic_sort.wgsl). */
const BLOCK = 512;
/**
 * Largest V · N for which "auto" takes the scan: on llvmpipe the sorted
 * variant already wins at V · N = 2^14 (1.6 against 1.9 ms, N = 256,
 * V = 64; see the bench); below, both cost about one submit.
 */
const SCAN_MAX_VN = 1 << 12;

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

/** Scatter-add of `dy` rows into `dTable` (the variant by size, or as forced). */
export function embeddingBackwardInPlace(
  core: DeviceCore,
  dTable: Tensor,
  ids: Tensor,
  dy: Tensor,
): void {
  const [V, C] = dTable.shape;
  checkOnDevice(core, "embeddingBackwardInPlace", "id", ids, V);
  const N = ids.size;
  if (dTable.size === 0 || N === 0) return;
  const vec = C % 4 === 0;
  const cols = vec ? C / 4 : C;
  const padded = Math.max(BLOCK, 2 ** Math.ceil(Math.log2(N)));
  const mode = core.embeddingBackward;
  const scan = mode === "scan" ||
    (mode === "auto" && V * N <= SCAN_MAX_VN) ||
    padded * 8 > core.maxBindingBytes;
  if (scan) {
    const units = V * cols;
    core.dispatch(
      KERNELS.embeddingBackwardScan,
      { VEC: vec },
      { n: units, cols, count: N },
      [buf(dTable), buf(ids), buf(dy)],
      grid(ceilDiv(units, WG)),
    );
    return;
  }
  const keys = sortedKeys(core, ids, N, padded, V);
  const units = N * cols;
  core.dispatch(
    KERNELS.embeddingBackward,
    { VEC: vec },
    { n: units, cols, count: N },
    [buf(dTable), keys, buf(dy)],
    grid(ceilDiv(units, WG)),
  );
  core.pool.release(keys);
}

/** (id, position) keys of `ids` padded to `padded` (a power of two ≥ BLOCK), sorted. */
function sortedKeys(
  core: DeviceCore,
  ids: Tensor,
  n: number,
  padded: number,
  vocab: number,
): GPUBuffer {
  const keys = core.temp(padded * 8);
  core.dispatch(
    KERNELS.embeddingKeys,
    {},
    { n: padded, count: n, vocab },
    [buf(ids), keys],
    grid(ceilDiv(padded, WG)),
  );
  const blocks = grid(padded / BLOCK);
  const pairs = grid(ceilDiv(padded / 2, WG));
  const local = core.sortInWorkgroupMemory;
  // Stages k ≤ BLOCK at once in workgroup memory, or one distance at a time.
  if (local) {
    core.dispatch(KERNELS.bitonicSort, { LOCAL: true }, { n: padded, k: 0, j: 0 }, [keys], blocks);
  }
  for (let k = local ? 2 * BLOCK : 2; k <= padded; k *= 2) {
    for (let j = k / 2; j >= (local ? BLOCK : 1); j /= 2) {
      core.dispatch(KERNELS.bitonicSort, { LOCAL: false }, { n: padded, k, j }, [keys], pairs);
    }
    if (local) {
      core.dispatch(KERNELS.bitonicSort, { LOCAL: true }, { n: padded, k, j: 0 }, [keys], blocks);
    }
  }
  return keys;
}
