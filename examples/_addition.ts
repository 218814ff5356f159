/**
 * The addition task of `learn_addition.ts`: problems drawn from a seed, a
 * held-out set that training never sees, and the character encoding.
 *
 * A problem `a + b` with `0 ≤ a, b ≤ 999` is written with both operands
 * zero-padded to 3 digits and the sum as 4 digits, least significant first:
 *
 * ```text
 * 123 + 45 = 168   →   prompt "123+045="   answer "8610"
 * ```
 *
 * Least significant digit first is the order a person adds in: each answer
 * digit depends on the two operand digits above it and on the carry out of
 * the digit just written, so a left-to-right model can compute it one digit
 * at a time. (Most significant first, the first digit already depends on
 * every carry.) Padding puts digit i of each operand at a fixed position.
 *
 * A training sequence is the prompt and the first 3 answer digits (11
 * tokens); position t is trained to predict token t + 1. Only the 4 answer
 * digits are worth learning; the operand digits are random, so the 7
 * positions that would predict them are given the pad target "." instead,
 * which the model learns at once (the loss of the framework has no mask).
 *
 * @module
 */

import { Rng } from "../mod.ts";
import { CharTokenizer } from "../data.ts";

/** Digits of each operand. */
export const OPERAND_DIGITS = 3;
/** Digits of the answer (999 + 999 = 1998). */
export const ANSWER_DIGITS = OPERAND_DIGITS + 1;
/** Characters of the prompt `"123+045="`. */
export const PROMPT_LENGTH = 2 * OPERAND_DIGITS + 2;
/** Tokens of a training sequence: the prompt and all answer digits but the last. */
export const SEQ_LEN = PROMPT_LENGTH + ANSWER_DIGITS - 1;
/** The target of positions that do not predict an answer digit. */
export const PAD = ".";
/** Largest operand. */
export const MAX_OPERAND = 10 ** OPERAND_DIGITS - 1;

/** The tokenizer: `"+"`, `"."`, the digits, `"="` (13 ids). */
export const TOKENIZER: CharTokenizer = CharTokenizer.fromText(`0123456789+=${PAD}`);

/** One problem `a + b`. */
export interface Problem {
  readonly a: number;
  readonly b: number;
}

function checkOperand(where: string, name: string, v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > MAX_OPERAND) {
    throw new RangeError(
      `${where}: ${name} must be an integer in [0, ${MAX_OPERAND}], got ${v}`,
    );
  }
}

/** `"123+045="`: both operands zero-padded. */
export function promptOf(p: Problem): string {
  checkOperand("promptOf", "a", p.a);
  checkOperand("promptOf", "b", p.b);
  const pad = (n: number) => String(n).padStart(OPERAND_DIGITS, "0");
  return `${pad(p.a)}+${pad(p.b)}=`;
}

/**
 * The order of the answer digits: `"reversed"`, least significant first
 * (168 → "8610", the default), or `"plain"`, as people write it
 * (168 → "0168").
 */
export type AnswerOrder = "reversed" | "plain";

/** The answer as the model writes it: the sum as 4 digits in `order` (168 → "8610"). */
export function answerOf(p: Problem, order: AnswerOrder = "reversed"): string {
  const digits = String(p.a + p.b).padStart(ANSWER_DIGITS, "0");
  return order === "reversed" ? [...digits].reverse().join("") : digits;
}

/** The number an answer string means ("8610" → 168), or null unless it is 4 digits. */
export function readAnswer(answer: string, order: AnswerOrder = "reversed"): number | null {
  if (!new RegExp(`^[0-9]{${ANSWER_DIGITS}}$`).test(answer)) return null;
  return Number(order === "reversed" ? [...answer].reverse().join("") : answer);
}

/** The key of a problem in the held-out set. */
export function keyOf(p: Problem): string {
  return `${p.a}+${p.b}`;
}

/**
 * `n` distinct problems with operands uniform in [0, 999], drawn from
 * `seed`: the held-out test. (81% of them add two 3-digit numbers; the
 * training stream draws short operands more often.)
 */
export function heldOutProblems(n: number, seed: number): Problem[] {
  if (!Number.isInteger(n) || n <= 0 || n > 100_000) {
    throw new RangeError(`heldOutProblems: n must be an integer in [1, 100000], got ${n}`);
  }
  const rng = new Rng(seed);
  const seen = new Set<string>();
  const out: Problem[] = [];
  while (out.length < n) {
    const p = { a: rng.int(MAX_OPERAND + 1), b: rng.int(MAX_OPERAND + 1) };
    if (seen.has(keyOf(p))) continue;
    seen.add(keyOf(p));
    out.push(p);
  }
  return out;
}

/**
 * Draws training problems from `rng`, never one whose key is in `exclude`
 * (the held-out set). Each operand first draws its number of digits,
 * uniform in 1–3, then its value uniform among the numbers of that many
 * digits (0–9, 10–99 or 100–999). Short operands are thus as common as
 * long ones, a built-in curriculum: problems whose upper digits are 0 show
 * the model which prompt digits each answer digit comes from, and with them
 * it leaves the loss plateau several times sooner than on operands uniform
 * in [0, 999].
 */
export class ProblemStream {
  readonly #rng: Rng;
  readonly #exclude: ReadonlySet<string>;

  constructor(rng: Rng, exclude: ReadonlySet<string>) {
    this.#rng = rng;
    this.#exclude = exclude;
  }

  #operand(): number {
    const digits = 1 + this.#rng.int(OPERAND_DIGITS);
    const lo = digits === 1 ? 0 : 10 ** (digits - 1);
    return lo + this.#rng.int(10 ** digits - lo);
  }

  /** The next training problem. */
  next(): Problem {
    for (;;) {
      const p = { a: this.#operand(), b: this.#operand() };
      if (!this.#exclude.has(keyOf(p))) return p;
    }
  }
}

/**
 * A training batch `[rows, SEQ_LEN]`: inputs are the prompt and the first
 * 3 answer digits; the targets are the pad for the 7 positions that would
 * predict the prompt, then the 4 answer digits.
 */
export function encodeBatch(
  problems: readonly Problem[],
  order: AnswerOrder = "reversed",
): { inputs: Float32Array; targets: Float32Array; shape: [number, number] } {
  const rows = problems.length;
  const inputs = new Float32Array(rows * SEQ_LEN);
  const targets = new Float32Array(rows * SEQ_LEN);
  const pad = TOKENIZER.encode(PAD)[0];
  problems.forEach((p, r) => {
    const seq = TOKENIZER.encode(promptOf(p) + answerOf(p, order)); // SEQ_LEN + 1 tokens
    for (let t = 0; t < SEQ_LEN; t++) {
      inputs[r * SEQ_LEN + t] = seq[t];
      targets[r * SEQ_LEN + t] = t + 1 < PROMPT_LENGTH ? pad : seq[t + 1];
    }
  });
  return { inputs, targets, shape: [rows, SEQ_LEN] };
}

/** Computes logits `[rows, SEQ_LEN, vocab]` for token ids `[rows, SEQ_LEN]`. */
export type LogitsFn = (inputs: Float32Array, shape: [number, number]) => Promise<Float32Array>;

/**
 * Greedy decoding of every problem's answer: the prompt goes in, the most
 * likely token at the last known position is appended, 4 times (one batched
 * forward pass per answer digit). Positions after the known ones hold the
 * pad; the model is causal, so they do not change what it predicts.
 * Returns the answers as written (in the trained order; any token the model
 * picks, so it may not be a number).
 */
export async function greedyAnswers(
  problems: readonly Problem[],
  logits: LogitsFn,
): Promise<string[]> {
  const rows = problems.length, V = TOKENIZER.vocabSize;
  const pad = TOKENIZER.encode(PAD)[0];
  const ids = new Float32Array(rows * SEQ_LEN).fill(pad);
  problems.forEach((p, r) => ids.set(TOKENIZER.encode(promptOf(p)), r * SEQ_LEN));
  const out: number[][] = problems.map(() => []);
  for (let d = 0; d < ANSWER_DIGITS; d++) {
    const pos = PROMPT_LENGTH - 1 + d; // predicts token pos + 1
    const y = await logits(ids, [rows, SEQ_LEN]);
    for (let r = 0; r < rows; r++) {
      const o = (r * SEQ_LEN + pos) * V;
      let best = 0;
      for (let v = 1; v < V; v++) if (y[o + v] > y[o + best]) best = v;
      out[r].push(best);
      if (pos + 1 < SEQ_LEN) ids[r * SEQ_LEN + pos + 1] = best;
    }
  }
  return out.map((o) => TOKENIZER.decode(o));
}

/** Fraction of `problems` whose answer, written in `order`, reads as their sum. */
export function exactMatch(
  problems: readonly Problem[],
  answers: readonly string[],
  order: AnswerOrder = "reversed",
): number {
  let ok = 0;
  problems.forEach((p, i) => {
    if (readAnswer(answers[i], order) === p.a + p.b) ok++;
  });
  return ok / problems.length;
}
