/**
 * GPT-2's byte-level BPE tokenizer, from a `vocab.json` and a `merges.txt`.
 *
 * @module
 */

import { describeValue } from "../text/describe.ts";

// GPT-2's pre-tokenisation: contractions, letters, numbers, other symbols,
// each with at most one leading space; runs of spaces.
const PIECES = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** GPT-2's `bytes_to_unicode`: each byte as a printable character (and back). */
function byteTables(): { toChar: string[]; toByte: Map<string, number> } {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const toChar: string[] = new Array(256);
  const toByte = new Map<string, number>();
  bs.forEach((b, i) => {
    const c = String.fromCodePoint(cs[i]);
    toChar[b] = c;
    toByte.set(c, b);
  });
  return { toChar, toByte };
}

const BYTES = byteTables();

/**
 * GPT-2's byte-level BPE: text is cut into pieces by GPT-2's
 * pre-tokenisation pattern, each piece's UTF-8 bytes are mapped to
 * printable characters (GPT-2's `bytes_to_unicode`), and the pairs listed
 * in `merges.txt` are merged lowest rank first; each resulting symbol's id
 * is its entry in `vocab.json`. Decoding maps ids back to bytes, so
 * `decode(encode(text)) === text` for any string (as UTF-8 round-trips it)
 * when the vocabulary holds every single byte, as GPT-2's does. Special
 * tokens such as `<|endoftext|>` are not split out of the text; their id is
 * {@linkcode BPETokenizer.id}`("<|endoftext|>")`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { BPETokenizer } from "@conveyor/core/data";
 * // A vocabulary of the 256 byte symbols plus two merges.
 * const vocab: Record<string, number> = {};
 * for (const c of BPETokenizer.byteSymbols()) vocab[c] = Object.keys(vocab).length;
 * vocab["he"] = 256;
 * vocab["Ġhe"] = 257;
 * const tok = BPETokenizer.fromStrings(JSON.stringify(vocab), "#version: 0.2\nh e\nĠ he\n");
 * const ids = tok.encode("he he!");
 * assert.deepEqual(ids, [256, 257, vocab["!"]]);
 * assert.equal(tok.decode(ids), "he he!");
 * assert.equal(tok.decode(tok.encode("naïve ☃ 日本")), "naïve ☃ 日本");
 * ```
 */
export class BPETokenizer {
  readonly #ids: Map<string, number>;
  readonly #tokens: string[];
  readonly #ranks: Map<string, number>;
  readonly #cache = new Map<string, number[]>();

  /** A tokenizer of `vocab` (symbol → id) and `merges` (pairs, highest priority first). */
  constructor(
    vocab: Readonly<Record<string, number>>,
    merges: readonly (readonly [string, string])[],
  ) {
    if (vocab === null || typeof vocab !== "object" || Array.isArray(vocab)) {
      throw new TypeError(
        `BPETokenizer: vocab must be an object of ids, got ${describeValue(vocab)}`,
      );
    }
    this.#ids = new Map();
    this.#tokens = [];
    for (const [tok, id] of Object.entries(vocab)) {
      if (!Number.isInteger(id) || id < 0) {
        throw new RangeError(
          `BPETokenizer: vocab[${JSON.stringify(tok)}] must be an id ≥ 0, got ${describeValue(id)}`,
        );
      }
      if (this.#tokens[id] !== undefined) {
        throw new RangeError(
          `BPETokenizer: id ${id} is given to both ${JSON.stringify(this.#tokens[id])} and ${
            JSON.stringify(tok)
          }`,
        );
      }
      this.#ids.set(tok, id);
      this.#tokens[id] = tok;
    }
    this.#ranks = new Map();
    merges.forEach(([a, b], i) => {
      const k = `${a} ${b}`;
      if (!this.#ranks.has(k)) this.#ranks.set(k, i);
    });
  }

  /**
   * Reads `vocab.json` and `merges.txt` texts (Hugging Face's GPT-2 files):
   * a JSON object of ids, and one `a b` pair per line after an optional
   * `#version` line. Throws a TypeError or RangeError naming the file and
   * line that does not parse.
   */
  static fromStrings(vocabJson: string, mergesTxt: string): BPETokenizer {
    let vocab: unknown;
    try {
      vocab = JSON.parse(vocabJson);
    } catch (e) {
      throw new TypeError(`vocab.json: not JSON (${(e as Error).message})`);
    }
    if (vocab === null || typeof vocab !== "object" || Array.isArray(vocab)) {
      throw new TypeError(
        `vocab.json: must be an object of token → id, got ${describeValue(vocab)}`,
      );
    }
    const merges: [string, string][] = [];
    mergesTxt.split("\n").forEach((raw, i) => {
      const line = raw.replace(/\r$/, "");
      if (line === "" || (i === 0 && line.startsWith("#version"))) return;
      const parts = line.split(" ");
      if (parts.length !== 2 || parts[0] === "" || parts[1] === "") {
        throw new RangeError(
          `merges.txt: line ${i + 1} must be two symbols separated by one space, got ${
            JSON.stringify(line.slice(0, 80))
          }`,
        );
      }
      merges.push([parts[0], parts[1]]);
    });
    return new BPETokenizer(vocab as Record<string, number>, merges);
  }

  /** Reads `vocab.json` and `merges.txt` from the folder `dir` (a path or a `file:` URL). */
  static async fromFolder(dir: string | URL): Promise<BPETokenizer> {
    const at = (name: string) => typeof dir === "string" ? `${dir}/${name}` : new URL(name, dir);
    const [v, m] = await Promise.all([
      Deno.readTextFile(at("vocab.json")),
      Deno.readTextFile(at("merges.txt")),
    ]);
    return BPETokenizer.fromStrings(v, m);
  }

  /** The 256 symbols GPT-2 maps bytes 0…255 to (`bytes_to_unicode`), in byte order. */
  static byteSymbols(): string[] {
    return [...BYTES.toChar];
  }

  /** One more than the largest id. */
  get vocabSize(): number {
    return this.#tokens.length;
  }

  /** The id of the symbol `token`, or undefined (e.g. `id("<|endoftext|>")`). */
  id(token: string): number | undefined {
    return this.#ids.get(token);
  }

  /** The ids of `text`; a RangeError names a piece whose symbol the vocabulary lacks. */
  encode(text: string): number[] {
    if (typeof text !== "string") {
      throw new TypeError(`BPETokenizer.encode: text must be a string, got ${describeValue(text)}`);
    }
    const out: number[] = [];
    const enc = new TextEncoder();
    for (const m of text.matchAll(PIECES)) {
      const piece = m[0];
      let ids = this.#cache.get(piece);
      if (ids === undefined) {
        let mapped = "";
        for (const b of enc.encode(piece)) mapped += BYTES.toChar[b];
        ids = this.#bpe(mapped).map((s) => {
          const id = this.#ids.get(s);
          if (id === undefined) {
            throw new RangeError(
              `BPETokenizer.encode: symbol ${JSON.stringify(s)} of ${
                JSON.stringify(piece)
              } is not in the vocabulary`,
            );
          }
          return id;
        });
        if (this.#cache.size < 100_000) this.#cache.set(piece, ids);
      }
      out.push(...ids);
    }
    return out;
  }

  /** The text of `ids` (bytes that are not whole UTF-8 characters become U+FFFD). */
  decode(ids: readonly number[]): string {
    const bytes: number[] = [];
    for (const id of ids) {
      const tok = Number.isInteger(id) ? this.#tokens[id] : undefined;
      if (tok === undefined) {
        throw new RangeError(
          `BPETokenizer.decode: ${describeValue(id)} is not an id of the vocabulary (0…${
            this.vocabSize - 1
          })`,
        );
      }
      for (const c of tok) {
        const b = BYTES.toByte.get(c);
        if (b === undefined) bytes.push(...new TextEncoder().encode(c));
        else bytes.push(b);
      }
    }
    return new TextDecoder().decode(new Uint8Array(bytes));
  }

  // Merges the pairs of `word`'s symbols, lowest rank first, until none is listed.
  #bpe(word: string): string[] {
    let syms = [...word];
    while (syms.length > 1) {
      let best = -1, bestRank = Infinity;
      for (let i = 0; i + 1 < syms.length; i++) {
        const r = this.#ranks.get(`${syms[i]} ${syms[i + 1]}`);
        if (r !== undefined && r < bestRank) {
          bestRank = r;
          best = i;
        }
      }
      if (best < 0) break;
      const a = syms[best], b = syms[best + 1];
      const next: string[] = [];
      for (let i = 0; i < syms.length; i++) {
        if (i + 1 < syms.length && syms[i] === a && syms[i + 1] === b) {
          next.push(a + b);
          i++;
        } else next.push(syms[i]);
      }
      syms = next;
    }
    return syms;
  }
}
