import assert from "node:assert/strict";
import { CharTokenizer } from "../../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../../src/nn/data/tiny_corpus.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";

Deno.test("CharTokenizer: ids in code-point order; encode and decode round-trip", () => {
  const tok = CharTokenizer.fromText("banana bread");
  assert.deepEqual(tok.vocab, [" ", "a", "b", "d", "e", "n", "r"]);
  const ids = tok.encode("bread");
  assert.deepEqual(ids, [2, 6, 4, 1, 3]);
  assert.equal(tok.decode(ids), "bread");
});

Deno.test("CharTokenizer: code points beyond the BMP are one character", () => {
  const tok = CharTokenizer.fromText("a😀b");
  assert.equal(tok.vocabSize, 3);
  assert.equal(tok.decode(tok.encode("😀a")), "😀a");
});

Deno.test("CharTokenizer: the shipped corpus is 10-20 KB with a small vocabulary", () => {
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  const bytes = new TextEncoder().encode(TINY_CORPUS).length;
  assert.ok(bytes >= 10_000 && bytes <= 20_000, `${bytes} bytes`);
  assert.equal(tok.vocabSize, 56);
  assert.equal(tok.decode(tok.encode(TINY_CORPUS)), TINY_CORPUS);
});

Deno.test("CharTokenizer: unknown characters, bad ids and bad vocabularies are refused with the values", () => {
  const tok = CharTokenizer.fromText("abc");
  assertThrowsWith(() => tok.encode("abz"), RangeError, ['"z"', "index 2"]);
  assertThrowsWith(() => tok.decode([0, 3]), RangeError, ["ids[1] = 3", "[0, 3)"]);
  assertThrowsWith(() => tok.decode([1.5]), RangeError, ["1.5"]);
  assertThrowsWith(() => new CharTokenizer(["a", "a"]), RangeError, ['"a" twice']);
  assertThrowsWith(() => new CharTokenizer(["ab"]), RangeError, ['"ab"']);
  assertThrowsWith(() => CharTokenizer.fromText(""), RangeError, ["non-empty"]);
});
