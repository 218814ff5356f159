/**
 * A character-level tokenizer: one id per distinct character.
 *
 * @module
 */

/**
 * Maps each distinct character (Unicode code point) of a text to an id,
 * ids assigned in code-point order so the same text always gives the same
 * vocabulary.
 *
 * @example
 * ```ts
 * import { CharTokenizer } from "@conveyor/core/data";
 * const tok = CharTokenizer.fromText("hello world");
 * const ids = tok.encode("hold");
 * console.log(tok.vocabSize, ids, tok.decode(ids)); // 8 [3, 5, 4, 1] "hold"
 * ```
 */
export class CharTokenizer {
  /** The characters, indexed by id. */
  readonly vocab: readonly string[];
  #ids: Map<string, number>;

  /** Creates a tokenizer over exactly these characters (distinct, each one code point). */
  constructor(vocab: readonly string[]) {
    if (!Array.isArray(vocab) || vocab.length === 0) {
      throw new RangeError(`CharTokenizer: vocab must be a non-empty array of characters`);
    }
    const ids = new Map<string, number>();
    vocab.forEach((c, i) => {
      if (typeof c !== "string" || [...c].length !== 1) {
        throw new RangeError(
          `CharTokenizer: vocab[${i}] must be a single character, got ${JSON.stringify(c)}`,
        );
      }
      if (ids.has(c)) {
        throw new RangeError(`CharTokenizer: vocab has ${JSON.stringify(c)} twice`);
      }
      ids.set(c, i);
    });
    this.vocab = Object.freeze([...vocab]);
    this.#ids = ids;
  }

  /** The tokenizer over the distinct characters of `text`, sorted by code point. */
  static fromText(text: string): CharTokenizer {
    if (typeof text !== "string" || text.length === 0) {
      throw new RangeError("CharTokenizer.fromText: text must be a non-empty string");
    }
    const chars = [...new Set(text)].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!);
    return new CharTokenizer(chars);
  }

  /** Number of ids. */
  get vocabSize(): number {
    return this.vocab.length;
  }

  /** Ids of the characters of `text`; throws a RangeError on a character outside the vocabulary. */
  encode(text: string): number[] {
    const out: number[] = [];
    let pos = 0;
    for (const c of text) {
      const id = this.#ids.get(c);
      if (id === undefined) {
        throw new RangeError(
          `CharTokenizer.encode: character ${
            JSON.stringify(c)
          } at index ${pos} is not in the vocabulary`,
        );
      }
      out.push(id);
      pos += c.length;
    }
    return out;
  }

  /** The text of `ids`; throws a RangeError on an id outside `[0, vocabSize)`. */
  decode(ids: ArrayLike<number>): string {
    let s = "";
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0 || id >= this.vocab.length) {
        throw new RangeError(
          `CharTokenizer.decode: ids[${i}] = ${id} is not an integer in [0, ${this.vocab.length})`,
        );
      }
      s += this.vocab[id];
    }
    return s;
  }
}
