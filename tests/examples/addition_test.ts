import assert from "node:assert/strict";
import { Rng } from "../../mod.ts";
import {
  ANSWER_DIGITS,
  answerOf,
  encodeBatch,
  exactMatch,
  greedyAnswers,
  heldOutProblems,
  keyOf,
  type Problem,
  ProblemStream,
  PROMPT_LENGTH,
  promptOf,
  readAnswer,
  SEQ_LEN,
  TOKENIZER,
} from "../../examples/_addition.ts";

Deno.test("addition: prompt zero-pads both operands, the answer is 4 digits in either order", () => {
  const p = { a: 123, b: 45 };
  assert.equal(promptOf(p), "123+045=");
  assert.equal(answerOf(p), "8610");
  assert.equal(answerOf(p, "plain"), "0168");
  assert.equal(answerOf({ a: 999, b: 999 }), "8991");
  assert.equal(answerOf({ a: 0, b: 0 }), "0000");
  assert.equal(promptOf({ a: 7, b: 0 }), "007+000=");
  assert.equal(PROMPT_LENGTH + ANSWER_DIGITS - 1, SEQ_LEN);
  assert.throws(() => promptOf({ a: 1000, b: 1 }), /a must be an integer in \[0, 999\], got 1000/);
  assert.throws(() => promptOf({ a: 1, b: -1 }), /b must be an integer in \[0, 999\], got -1/);
});

Deno.test("addition: readAnswer inverts answerOf and refuses anything but 4 digits", () => {
  const rng = new Rng(3);
  for (let i = 0; i < 200; i++) {
    const p = { a: rng.int(1000), b: rng.int(1000) };
    assert.equal(readAnswer(answerOf(p)), p.a + p.b);
    assert.equal(readAnswer(answerOf(p, "plain"), "plain"), p.a + p.b);
  }
  assert.equal(readAnswer("8610", "plain"), 8610);
  for (const bad of ["861", "86100", "86+0", "....", ""]) assert.equal(readAnswer(bad), null);
});

Deno.test("addition: the held-out set is distinct, in range and the same for the same seed", () => {
  const a = heldOutProblems(500, 9), b = heldOutProblems(500, 9), c = heldOutProblems(500, 10);
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
  assert.equal(new Set(a.map(keyOf)).size, 500);
  for (const p of a) assert.ok(p.a >= 0 && p.a <= 999 && p.b >= 0 && p.b <= 999, keyOf(p));
  // Operands uniform in [0, 999]: most are 3-digit numbers.
  const long = a.filter((p) => p.a >= 100 && p.b >= 100).length;
  assert.ok(long > 350 && long < 460, `${long} of 500 with two 3-digit operands`);
  assert.throws(() => heldOutProblems(0, 1), /n must be an integer in \[1, 100000\], got 0/);
});

Deno.test("addition: the training stream never yields a held-out problem", () => {
  // Exclude every problem of two 1-digit operands: the stream draws one of
  // them about once in 9 draws, so in 3000 draws it would hit ~330.
  const exclude = new Set<string>();
  for (let a = 0; a < 10; a++) for (let b = 0; b < 10; b++) exclude.add(keyOf({ a, b }));
  const s = new ProblemStream(new Rng(5), exclude);
  const digits = (n: number) => String(n).length;
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 3000; i++) {
    const p = s.next();
    assert.ok(!exclude.has(keyOf(p)), `held-out problem ${keyOf(p)} drawn`);
    assert.ok(p.a >= 0 && p.a <= 999 && p.b >= 0 && p.b <= 999, keyOf(p));
    assert.ok(digits(p.a) > 1 || digits(p.b) > 1, keyOf(p));
    counts[digits(p.a)]++;
  }
  // Operand lengths 1, 2, 3 equally likely, less the excluded pairs: 1 digit
  // in 1/4 of the problems left (750 expected), 2 and 3 digits 3/8 each (1125).
  assert.ok(counts[1] > 620 && counts[1] < 880, `${counts[1]} operands of 1 digit`);
  for (const d of [2, 3]) {
    assert.ok(counts[d] > 980 && counts[d] < 1270, `${counts[d]} operands of ${d} digits`);
  }
  const again = new ProblemStream(new Rng(5), exclude);
  const first = new ProblemStream(new Rng(5), exclude).next();
  assert.deepEqual(again.next(), first);
});

Deno.test("addition: a batch is the prompt and 3 answer digits; targets pad the prompt, then the answer", () => {
  const probs = [{ a: 123, b: 45 }, { a: 999, b: 1 }];
  const b = encodeBatch(probs);
  assert.deepEqual(b.shape, [2, SEQ_LEN]);
  const row = (d: Float32Array, r: number) =>
    TOKENIZER.decode(Array.from(d.subarray(r * SEQ_LEN, (r + 1) * SEQ_LEN)));
  assert.equal(row(b.inputs, 0), "123+045=861");
  assert.equal(row(b.targets, 0), ".......8610");
  assert.equal(row(b.inputs, 1), "999+001=000");
  assert.equal(row(b.targets, 1), ".......0001");
  const plain = encodeBatch(probs, "plain");
  assert.equal(row(plain.inputs, 0), "123+045=016");
  assert.equal(row(plain.targets, 0), ".......0168");
});

/** Logits of a model that at every position puts all weight on `next(ids of the row, t)`. */
function fakeModel(next: (row: number[], t: number) => string) {
  const V = TOKENIZER.vocabSize;
  let calls = 0;
  const fn = (ids: Float32Array, shape: [number, number]) => {
    calls++;
    const [rows, T] = shape;
    const out = new Float32Array(rows * T * V);
    for (let r = 0; r < rows; r++) {
      const row = Array.from(ids.subarray(r * T, (r + 1) * T));
      for (let t = 0; t < T; t++) out[(r * T + t) * V + TOKENIZER.encode(next(row, t))[0]] = 5;
    }
    return Promise.resolve(out);
  };
  return { fn, calls: () => calls };
}

Deno.test("addition: greedy decoding of a perfect adder is all right, one forward pass per digit", async () => {
  const probs: Problem[] = heldOutProblems(50, 2);
  // Knows the answer from the prompt alone: predicts answer digit t - 7.
  const m = fakeModel((row, t) => {
    const text = TOKENIZER.decode(row.slice(0, PROMPT_LENGTH));
    const [a, b] = text.slice(0, -1).split("+").map(Number);
    return t + 1 < PROMPT_LENGTH ? "." : answerOf({ a, b })[t + 1 - PROMPT_LENGTH];
  });
  const answers = await greedyAnswers(probs, m.fn);
  assert.equal(m.calls(), ANSWER_DIGITS);
  assert.deepEqual(answers, probs.map((p) => answerOf(p)));
  assert.equal(exactMatch(probs, answers), 1);
  // One wrong digit makes the whole answer wrong.
  const spoiled = answers.map((s, i) => (i < 10 ? s.slice(0, 3) + ((+s[3] + 1) % 10) : s));
  assert.equal(exactMatch(probs, spoiled), 0.8);
});

Deno.test("addition: greedy decoding feeds each chosen digit back in (real decoding, not teacher forcing)", async () => {
  // A model that writes the digit after the one before it ("=" counts as 0):
  // only decoding that appends its own choices gives "1234".
  const m = fakeModel((row, t) => {
    const prev = TOKENIZER.decode([row[t]]);
    return prev === "=" ? "1" : /\d/.test(prev) ? String((+prev + 1) % 10) : ".";
  });
  const answers = await greedyAnswers([{ a: 1, b: 2 }, { a: 500, b: 500 }], m.fn);
  assert.deepEqual(answers, ["1234", "1234"]);
});
