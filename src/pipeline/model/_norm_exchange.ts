// The one collective the model stages need: with global-norm clipping, every
// rank adds up the partial sums of squared gradients of all ranks before it
// steps. It runs over the rank's CommBackend with its own tags (the
// runtime's tags start with "act" or "grad"), so an aborted run rejects it.

import type { CommBackend } from "../comm/backend.ts";

// An f64 travels as three f32 (hi + mid + lo == value exactly), so every
// rank adds the very same numbers.
function encode(v: number): Float32Array {
  const hi = Math.fround(v);
  const mid = Math.fround(v - hi);
  const lo = Math.fround(v - hi - mid);
  return new Float32Array([hi, mid, lo]);
}

function decode(a: Float32Array): number {
  return a[0] + a[1] + a[2];
}

/**
 * Sends `value` to every other rank and resolves with the sum over all
 * ranks for `iteration`, added in rank order (identical bits on every rank).
 */
export async function allSum(
  comm: CommBackend,
  iteration: number,
  value: number,
): Promise<number> {
  const tag = `norm/${iteration}`;
  const sends: Promise<void>[] = [];
  for (let r = 0; r < comm.size; r++) {
    if (r !== comm.rank) sends.push(comm.send(r, tag, encode(value), { transfer: true }));
  }
  const values = await Promise.all(
    Array.from(
      { length: comm.size },
      (_, r) => r === comm.rank ? Promise.resolve(value) : comm.recv(r, tag).then(decode),
    ),
  );
  await Promise.all(sends);
  let total = 0;
  for (const v of values) total += v;
  return total;
}
