// What travels between MPI ranks. Every message of the backend is either an
// envelope, always on MPI tag ENVELOPE_TAG, or a tensor payload on a tag of
// its own that the envelope before it names. Not exported from the package.
//
// Tag mapping. A string tag (`act/i0/c1/m3`, `norm/7`, anything) never
// becomes an MPI tag: it travels losslessly inside the tensor's envelope,
// and the receiver matches (peer, string tag) in its mailbox, FIFO per key.
// The payload that follows goes on a per-destination sequence number that
// cycles through [PAYLOAD_TAG_MIN, MPI_TAG_UB], so the receiver posts its
// MPI_Irecv for exactly that payload (into an array of the announced size)
// however the envelopes' own receives complete. Both tags stay within any
// MPI_TAG_UB (the standard guarantees at least 32767; Open MPI 4 gives
// 2^31 - 1). A hash would collide; one MPI tag per string would need a
// table agreed by both sides.

import { deserialize, serialize } from "node:v8";
import type { ControlMessage } from "./backend.ts";

/** MPI tag of every envelope. */
export const ENVELOPE_TAG = 1;
/** First MPI tag of tensor payloads. */
export const PAYLOAD_TAG_MIN = 16;

const TENSOR = 0;
const CONTROL = 1;
const TENSOR_HEAD = 12;

/** A control envelope: rendezvous, liveness, barrier, failure and user messages. */
export type ControlEnvelope =
  | { readonly c: "hello"; readonly pid: number; readonly host: string }
  | { readonly c: "hb"; readonly at?: string }
  | { readonly c: "barrier"; readonly gen: number }
  | { readonly c: "abort"; readonly reason: string }
  | { readonly c: "error"; readonly report: ControlMessage }
  | { readonly c: "lost"; readonly rank: number; readonly why: string }
  | { readonly c: "user"; readonly message: ControlMessage }
  | { readonly c: "bye" };

/** A decoded envelope. */
export type Envelope =
  | {
    readonly kind: "tensor";
    readonly tag: string;
    readonly count: number;
    readonly payloadTag: number;
  }
  | { readonly kind: "control"; readonly body: ControlEnvelope };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A fresh array in its own (off-heap) ArrayBuffer, safe to hand to MPI for a while. */
export function offHeapBytes(length: number): Uint8Array {
  return new Uint8Array(new ArrayBuffer(length));
}

/** The envelope announcing `count` floats under `tag`, sent on `payloadTag`. */
export function encodeTensor(tag: string, count: number, payloadTag: number): Uint8Array {
  const text = encoder.encode(tag);
  const out = offHeapBytes(TENSOR_HEAD + text.length);
  const view = new DataView(out.buffer);
  out[0] = TENSOR;
  view.setUint32(4, count, true);
  view.setUint32(8, payloadTag, true);
  out.set(text, TENSOR_HEAD);
  return out;
}

/**
 * A control envelope. Throws a TypeError naming the problem when a user
 * message cannot be serialised (structured clone rules).
 */
export function encodeControl(body: ControlEnvelope): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = serialize(body);
  } catch (e) {
    throw new TypeError(
      `control message must be structured-cloneable: ${(e as Error).message}`,
    );
  }
  const out = offHeapBytes(1 + bytes.length);
  out[0] = CONTROL;
  out.set(bytes, 1);
  return out;
}

/** Decodes an envelope; throws a TypeError for bytes that are not one. */
export function decodeEnvelope(bytes: Uint8Array): Envelope {
  if (bytes.length >= TENSOR_HEAD && bytes[0] === TENSOR) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return {
      kind: "tensor",
      count: view.getUint32(4, true),
      payloadTag: view.getUint32(8, true),
      tag: decoder.decode(bytes.subarray(TENSOR_HEAD)),
    };
  }
  if (bytes.length >= 1 && bytes[0] === CONTROL) {
    const body = deserialize(bytes.subarray(1)) as ControlEnvelope;
    if (body !== null && typeof body === "object" && typeof body.c === "string") {
      return { kind: "control", body };
    }
  }
  throw new TypeError(`not a Conveyor MPI envelope (${bytes.length} bytes, kind ${bytes[0]})`);
}
