// Messages inside a text stream: how the host process of a subprocess rank
// group answers over its standard output, which its ranks print to as
// well. A message is V8's structured serialization in base64, cut into
// lines that start with a tag no printed text holds (a record separator
// and a random word); each line goes out in one `console.log`, which Deno
// writes whole under the lock its workers' `console.log` takes, so printed
// text falls between lines, never inside one. The reader hands back the
// text as it came and the messages. Not exported from the package.

import { deserialize, serialize } from "node:v8";

// Base64 characters per line (each line one write).
const CHUNK = 1 << 20;
const RS = 0x1e;
const NL = 0x0a;

/** The tag of a stream's message lines, from a random `word` (letters and digits). */
export function lineTag(word: string): string {
  return `\x1econveyor-${word}:`;
}

/** `message` as lines (without their newline): the last one ends the message. */
export function frameLines(message: unknown, tag: string): string[] {
  const text = (serialize(message) as Uint8Array & { toBase64(): string }).toBase64();
  const lines: string[] = [];
  for (let at = 0; at < text.length || lines.length === 0; at += CHUNK) {
    const end = at + CHUNK >= text.length;
    lines.push(`${tag}${end ? "." : "+"}${text.slice(at, at + CHUNK)}`);
  }
  return lines;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const fromBase64 = (Uint8Array as unknown as { fromBase64(s: string): Uint8Array }).fromBase64;

/** Splits a stream written with {@linkcode frameLines} into its text and its messages. */
export class FrameLineReader {
  readonly #tag: Uint8Array;
  // Bytes from a record separator on, waiting for the end of their line.
  #line: Uint8Array[] = [];
  // Pieces of the message being read.
  #message: Uint8Array[] = [];

  /** A reader of lines tagged `tag`. */
  constructor(tag: string) {
    this.#tag = new TextEncoder().encode(tag);
  }

  /** Reads `bytes`: returns the text to pass on and the messages completed, in order. */
  push(bytes: Uint8Array): { text: Uint8Array[]; messages: unknown[] } {
    const text: Uint8Array[] = [];
    const messages: unknown[] = [];
    let rest = bytes;
    while (rest.length > 0) {
      if (this.#line.length === 0) {
        const start = rest.indexOf(RS);
        if (start < 0) {
          text.push(rest);
          break;
        }
        if (start > 0) text.push(rest.subarray(0, start));
        rest = rest.subarray(start);
      }
      const nl = rest.indexOf(NL);
      if (nl < 0) {
        this.#line.push(rest);
        break;
      }
      const line = concat([...this.#line, rest.subarray(0, nl)]);
      this.#line = [];
      rest = rest.subarray(nl + 1);
      if (!this.#isTagged(line)) {
        text.push(line, new Uint8Array([NL]));
        continue;
      }
      const body = new TextDecoder().decode(line.subarray(this.#tag.length + 1));
      this.#message.push(fromBase64(body));
      if (line[this.#tag.length] === 0x2e) { // "."
        const whole = concat(this.#message);
        this.#message = [];
        messages.push(deserialize(whole));
      }
    }
    return { text, messages };
  }

  /** The text held back at the end of the stream (a line begun, never ended). */
  end(): Uint8Array {
    const held = concat(this.#line.length === 0 ? [new Uint8Array()] : this.#line);
    this.#line = [];
    return this.#isTagged(held) ? new Uint8Array() : held;
  }

  #isTagged(line: Uint8Array): boolean {
    if (line.length <= this.#tag.length) return false;
    for (let i = 0; i < this.#tag.length; i++) if (line[i] !== this.#tag[i]) return false;
    return true;
  }
}
