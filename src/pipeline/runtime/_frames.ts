// Length-prefixed messages over a byte stream (from a subprocess rank group
// to its host process, over the host's standard input): a 4-byte little-endian
// length, then the message as V8's structured serialization, so typed
// arrays, maps and errors' fields cross as they are. Not exported from the
// package.

import { deserialize, serialize } from "node:v8";

/** Where frames are written: a stream that may take part of a write. */
export interface FrameSink {
  /** Writes some of `p`; resolves with how many bytes. */
  write(p: Uint8Array): Promise<number>;
}

/** Where frames are read from. */
export interface FrameSource {
  /** Reads into `p`; resolves with how many bytes, or null at the end. */
  read(p: Uint8Array): Promise<number | null>;
}

// The write in progress per connection: a large frame goes out in several
// partial writes, so two frames written at once would interleave their
// bytes; each frame waits for the one before it.
const tails = new WeakMap<FrameSink, Promise<void>>();

/**
 * Writes one message, after every message written to `conn` before it.
 * Throws at once when `message` cannot be serialised.
 */
export function writeFrame(conn: FrameSink, message: unknown): Promise<void> {
  const body = serialize(message);
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length, true);
  frame.set(body, 4);
  const write = async () => {
    for (let at = 0; at < frame.length;) at += await conn.write(frame.subarray(at));
  };
  const done = (tails.get(conn) ?? Promise.resolve()).then(write, write);
  tails.set(conn, done.catch(() => {}));
  return done;
}

// Fills `out` from `conn`; false when the stream ends first (cleanly only at 0 bytes).
async function readFull(conn: FrameSource, out: Uint8Array): Promise<boolean> {
  let at = 0;
  while (at < out.length) {
    const n = await conn.read(out.subarray(at));
    if (n === null) {
      if (at === 0) return false;
      throw new Error(`the stream ended inside a message (${at} of ${out.length} bytes)`);
    }
    at += n;
  }
  return true;
}

/** Every message read from `conn`, until it closes. */
export async function* readFrames(conn: FrameSource): AsyncGenerator<unknown> {
  const head = new Uint8Array(4);
  for (;;) {
    if (!await readFull(conn, head)) return;
    const body = new Uint8Array(new DataView(head.buffer).getUint32(0, true));
    if (!await readFull(conn, body)) throw new Error("the stream ended inside a message");
    yield deserialize(body);
  }
}
