// Values (structured-cloneable) over a CommBackend, and the few collectives
// the SPMD rank group needs: every process runs the same program, so every
// rank makes the same calls in the same order and tags built from a shared
// counter match across ranks. Not exported from the package.
//
// A value travels as one Float32Array message: its node:v8 serialisation,
// after a 4-byte length, padded to whole floats. Every transport moves
// those floats bit for bit (typed-array copies of the same element type,
// MPI_FLOAT between hosts of one architecture), so the bytes come back
// unchanged.

import { deserialize, serialize } from "node:v8";
import type { CommBackend } from "../comm/backend.ts";

/** `value` as one message. Throws a TypeError naming `what` if it cannot be cloned. */
export function encodeValue(value: unknown, what: string): Float32Array {
  let bytes: Uint8Array;
  try {
    bytes = serialize(value);
  } catch (e) {
    throw new TypeError(`${what} cannot be sent to other ranks: ${(e as Error).message}`);
  }
  const out = new Float32Array(Math.ceil(bytes.length / 4) + 1);
  new DataView(out.buffer).setUint32(0, bytes.length, true);
  new Uint8Array(out.buffer).set(bytes, 4);
  return out;
}

/** The value of a message made by {@linkcode encodeValue}. */
export function decodeValue(message: Float32Array): unknown {
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength);
  const length = view.getUint32(0, true);
  return deserialize(new Uint8Array(message.buffer, message.byteOffset + 4, length));
}

/** Sends `value` to `peer` under `tag`. */
export function sendValue(
  comm: CommBackend,
  peer: number,
  tag: string,
  value: unknown,
): Promise<void> {
  return comm.send(peer, tag, encodeValue(value, `the message ${tag}`), { transfer: true });
}

/** The next value from `peer` under `tag`. */
export async function recvValue(comm: CommBackend, peer: number, tag: string): Promise<unknown> {
  return decodeValue(await comm.recv(peer, tag));
}

/** Every rank's `value`, indexed by rank (each rank sends its own to every other). */
export async function allGather<T>(comm: CommBackend, tag: string, value: T): Promise<T[]> {
  const message = encodeValue(value, `the message ${tag}`);
  const sends: Promise<void>[] = [];
  for (let r = 0; r < comm.size; r++) {
    if (r !== comm.rank) sends.push(comm.send(r, tag, message));
  }
  const values = await Promise.all(
    Array.from(
      { length: comm.size },
      (_, r) => r === comm.rank ? Promise.resolve(value) : recvValue(comm, r, tag) as Promise<T>,
    ),
  );
  await Promise.all(sends);
  return values;
}

/** `root` sends `value` to every other rank; every rank resolves with root's value. */
export async function broadcastValue<T>(
  comm: CommBackend,
  root: number,
  tag: string,
  value: T,
): Promise<T> {
  if (comm.rank !== root) return await recvValue(comm, root, tag) as T;
  const message = encodeValue(value, `the message ${tag}`);
  const sends: Promise<void>[] = [];
  for (let r = 0; r < comm.size; r++) {
    if (r !== root) sends.push(comm.send(r, tag, message));
  }
  await Promise.all(sends);
  return value;
}

/** A short, stable digest of `text` (FNV-1a, 32 bits, hex): to compare, not to secure. */
export function digest(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** A short, stable digest of `bytes` (FNV-1a over 32-bit words, hex): to compare, not to secure. */
export function digestBytes(bytes: Uint8Array): string {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const words = bytes.length >>> 2;
  let h = 0x811c9dc5 ^ bytes.length;
  for (let i = 0; i < words; i++) h = Math.imul(h ^ view.getUint32(4 * i, true), 0x01000193);
  for (let i = 4 * words; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}

/**
 * How a setting that every rank must agree on is compared and shown: short
 * values as JSON, bytes (or a list of them) by size and digest, anything
 * longer by its JSON's digest.
 */
export function settingText(value: unknown): string {
  const parts = value instanceof Uint8Array ? [value] : value;
  if (Array.isArray(parts) && parts.length > 0 && parts.every((p) => p instanceof Uint8Array)) {
    const bytes = parts.reduce((n, p: Uint8Array) => n + p.length, 0);
    return `${bytes} bytes, digest ${digest(parts.map((p) => digestBytes(p)).join(","))}`;
  }
  const json = JSON.stringify(value) ?? String(value);
  return json.length <= 48 ? json : `digest ${digest(json)}`;
}
