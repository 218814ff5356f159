import assert from "node:assert/strict";
import { BPETokenizer } from "../../src/nn/bpe_tokenizer.ts";
import { Rng } from "../../src/tensor/random.ts";
import { tinyTokenizerFiles } from "./_gpt2_reference.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";

const files = tinyTokenizerFiles(300);
const tok = BPETokenizer.fromStrings(files.vocabJson, files.mergesTxt);

Deno.test("BPETokenizer: GPT-2's byte map (printable bytes are themselves, space is Ġ, newline Ċ; 256 distinct symbols)", () => {
  const s = BPETokenizer.byteSymbols();
  assert.equal(new Set(s).size, 256);
  assert.equal(s[0x41], "A");
  assert.equal(s[0x20], "Ġ");
  assert.equal(s[0x0a], "Ċ");
  assert.equal(s[0xad], "Ń"); // the 68th unprintable byte: U+0100 + 67
});

Deno.test("BPETokenizer: pre-tokenises as GPT-2 (a leading space joins the word; contractions apart) and merges lowest rank first", () => {
  const ids = tok.encode("the fox");
  assert.equal(tok.decode(ids), "the fox");
  // "the" and " fox" are frequent in the training text: merged into one symbol each.
  assert.equal(ids.length, 2);
  assert.ok(ids.every((i) => i >= 256));
  // Pieces never merge across: "I" "'ll", and "a" " " " b" (a run of spaces leaves its last to the word).
  assert.deepEqual(tok.encode("I'll"), [...tok.encode("I"), ...tok.encode("'ll")]);
  assert.deepEqual(tok.encode("a  the"), [
    ...tok.encode("a"),
    ...tok.encode(" "),
    ...tok.encode(" the"),
  ]);
  assert.equal(tok.encode(" the").length, 1);
  assert.equal(tok.id("<|endoftext|>"), tok.vocabSize - 1);
});

Deno.test("BPETokenizer: encode/decode round-trips any text (random code points: ASCII, Latin, CJK, emoji, combining marks, whitespace runs)", () => {
  const rng = new Rng(3);
  const pools = [[0x20, 0x7e], [0xa0, 0x17f], [0x4e00, 0x4fff], [0x1f600, 0x1f64f], [0x300, 0x36f]];
  for (let n = 0; n < 200; n++) {
    let s = "";
    const len = 1 + rng.int(30);
    for (let i = 0; i < len; i++) {
      const r = rng.next();
      if (r < 0.1) s += [" ", "\n", "\t", "  ", "\r\n"][rng.int(5)];
      else {
        const [a, b] = pools[rng.int(pools.length)];
        s += String.fromCodePoint(a + rng.int(b - a + 1));
      }
    }
    assert.equal(tok.decode(tok.encode(s)), s, JSON.stringify(s));
  }
});

Deno.test("BPETokenizer: refuses a malformed merges line, a repeated id, and an id outside the vocabulary, naming them", () => {
  assertThrowsWith(() => BPETokenizer.fromStrings("{}", "#version: 0.2\na b c\n"), RangeError, [
    "merges.txt: line 2",
    '"a b c"',
  ]);
  assertThrowsWith(() => BPETokenizer.fromStrings('{"a": 0, "b": 0}', ""), RangeError, [
    "id 0",
    '"a"',
    '"b"',
  ]);
  assertThrowsWith(() => tok.decode([1, 9999]), RangeError, ["9999", "0…299"]);
  assertThrowsWith(() => BPETokenizer.fromStrings("[1]", ""), TypeError, ["vocab.json"]);
});
