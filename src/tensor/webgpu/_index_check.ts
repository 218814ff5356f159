/**
 * Checks of integer inputs (embedding ids, cross-entropy targets) on
 * WebGPU, so that an out-of-range value is the same RangeError as on the
 * CPU (op, value, position, valid range) instead of a NaN row.
 *
 * - Ids that came from host data (`fromData`, and copies, row slices or
 *   concatenations of such tensors) are checked on the host, synchronously,
 *   before any work is queued, from the record `_host_values.ts` keeps:
 *   O(1) per call when all are valid. Cost measured by the since-removed
 *   `bench/id_check.ts` (`git log`; llvmpipe on a shared 2-core machine,
 *   noisy): the check 10–35 ns per call; the record is one scan of the
 *   data in `fromData`, about 0.22 ms for 65,536 ids (1.2 ms for 262,144),
 *   and stops at the first non-integer for float data such as weights
 *   (under 1 µs).
 * - Ids computed on the device have no host record. A check kernel then
 *   runs before the op and its 8-byte result is read back without waiting;
 *   an out-of-range value becomes a RangeError thrown by the next `read()`
 *   or `sync()`: after the op ran (its rows are NaN, or, for a gradient,
 *   skipped), since WebGPU cannot read data back synchronously. Cost: two
 *   small dispatches, a submit and a mapped 8-byte read per call (0.1 to
 *   5 ms extra per embedding call in that bench, mostly the forced submit).
 *
 * @module
 */

import type { InvalidIndex } from "../backend.ts";
import type { Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, grid, WG } from "./_device.ts";
import { firstInvalid } from "./_host_values.ts";
import { KERNELS } from "./_kernels.ts";

/** The first invalid entry from the host record, null if none, undefined without a record. */
export function invalidIndex(
  core: DeviceCore,
  ids: Tensor,
  n: number,
): InvalidIndex | null | undefined {
  const h = core.hostValues(ids);
  return h === undefined ? undefined : firstInvalid(h, n);
}

/**
 * For ids without a host record: records the device check and reports an
 * invalid entry, once the GPU has run it, as a RangeError of the next
 * `read()` or `sync()`. No-op for ids the host has checked already.
 */
export function checkOnDevice(
  core: DeviceCore,
  op: string,
  what: string,
  ids: Tensor,
  n: number,
): void {
  const count = ids.size;
  if (count === 0 || core.hostValues(ids) !== undefined) return;
  const flag = core.temp(8);
  core.clear(flag, 2);
  const params = { n: count, limit: n };
  core.dispatch(
    KERNELS.checkIndices,
    { STAGE: 0 },
    params,
    [buf(ids), flag],
    grid(ceilDiv(count, WG)),
  );
  core.dispatch(KERNELS.checkIndices, { STAGE: 1 }, params, [buf(ids), flag], [1, 1, 1]);
  core.readBackLater(flag, 8, (data) => {
    const m = new Uint32Array(data)[0];
    if (m === 0) return;
    const value = new Float32Array(data)[1];
    core.deferError(
      new RangeError(
        `${op}: ${what} at position ${count - m} must be an integer in [0, ${n}), got ${value} ` +
          "(found by a device check: these ids were computed on the GPU, so the op had already run)",
      ),
    );
  });
  core.pool.release(flag);
}
