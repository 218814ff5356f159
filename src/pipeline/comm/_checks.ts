import { describeValue } from "../../text/describe.ts";
// Argument checks and buffer preparation shared by the backends. Not
// exported from the package.

/** Throws a RangeError unless `peer` is a rank of a group of `size`. */
export function checkPeer(peer: unknown, size: number): number {
  if (typeof peer !== "number" || !Number.isInteger(peer) || peer < 0 || peer >= size) {
    throw new RangeError(
      `peer must be an integer rank in [0, ${size - 1}], got ${describeValue(peer)}`,
    );
  }
  return peer;
}

/** Throws a TypeError unless `tag` is a non-empty string. */
export function checkTag(tag: unknown): string {
  if (typeof tag !== "string" || tag.length === 0) {
    throw new TypeError(`tag must be a non-empty string, got ${JSON.stringify(tag)}`);
  }
  return tag;
}

/** Throws a TypeError unless `data` is a Float32Array. */
export function checkData(data: unknown): Float32Array {
  if (!(data instanceof Float32Array)) {
    const what = data === null ? "null" : (data as object)?.constructor?.name ?? typeof data;
    throw new TypeError(`data must be a Float32Array, got ${what}`);
  }
  return data;
}

/**
 * An array the transport may own, whose whole buffer can be transferred:
 * the array itself when the caller gives it away and it spans its whole
 * (non-shared) buffer, else a private copy.
 */
export function ownedArray(data: Float32Array, transfer: boolean): Float32Array {
  const whole = data.buffer instanceof ArrayBuffer && data.byteOffset === 0 &&
    data.byteLength === data.buffer.byteLength;
  return transfer && whole ? data : data.slice();
}

/**
 * {@linkcode ownedArray}, with its buffer moved when it is the caller's own:
 * the caller's array is detached exactly as a worker transfer detaches it,
 * for deliveries that never cross a thread.
 */
export function movedArray(data: Float32Array, transfer: boolean): Float32Array {
  const owned = ownedArray(data, transfer);
  return owned === data
    ? structuredClone(owned, { transfer: [owned.buffer as ArrayBuffer] })
    : owned;
}

/** Throws a RangeError unless `size` is a positive integer. */
export function checkSize(size: unknown, what = "size"): number {
  if (typeof size !== "number" || !Number.isInteger(size) || size < 1) {
    throw new RangeError(`${what} must be a positive integer, got ${describeValue(size)}`);
  }
  return size;
}

/** Whether `value` is a promise-like (has a `then` method). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === "object" &&
    typeof (value as { then?: unknown }).then === "function";
}
