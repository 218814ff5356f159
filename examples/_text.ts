/**
 * Text for the character-level examples: the training text (the corpus the
 * project ships, or `--text FILE`) and sampling from a trained model.
 *
 * @module
 */

import type { Rng } from "../mod.ts";
import { CharTokenizer, TINY_CORPUS } from "../data.ts";

/** A training text and its tokenizer. */
export interface TrainingText {
  /** Where the text came from: a file path or "the built-in corpus". */
  readonly source: string;
  readonly text: string;
  readonly tokenizer: CharTokenizer;
  /** The text's token ids. */
  readonly tokens: number[];
  /** The default prompt: "The " for the built-in corpus, else the text's first 4 characters. */
  readonly defaultPrompt: string;
}

/**
 * The text of `path` (UTF-8), or the built-in corpus when `path` is
 * undefined. Throws an Error naming the file when it cannot be read, and a
 * RangeError when it has fewer than `minChars` characters (a training
 * window needs seqLen + 1).
 */
export async function loadText(path: string | undefined, minChars: number): Promise<TrainingText> {
  let text = TINY_CORPUS, source = "the built-in corpus";
  if (path !== undefined) {
    try {
      text = await Deno.readTextFile(path);
    } catch (e) {
      throw new Error(`cannot read --text ${path}: ${(e as Error).message}`);
    }
    source = path;
  }
  const chars = [...text].length;
  if (chars < minChars) {
    throw new RangeError(
      `--text ${path} has ${chars} characters; training needs at least ${minChars} ` +
        "(the sequence length + 1)",
    );
  }
  const tokenizer = CharTokenizer.fromText(text);
  return {
    source,
    text,
    tokenizer,
    tokens: tokenizer.encode(text),
    defaultPrompt: path === undefined ? "The " : [...text].slice(0, 4).join(""),
  };
}

/** Logits `[1, T, V]` (row-major) of a model for token ids `[1, T]`. */
export type NextLogits = (ids: Float32Array, shape: [number, number]) => Promise<Float32Array>;

/**
 * Draws `n` characters after `prompt`, each from the model's distribution
 * at the last position: softmax(logits / temperature) with `rng`, or the
 * most likely character when `temperature` is 0 (greedy). The context is
 * the last `seqLen` characters. Returns the prompt and the new characters.
 * Throws a RangeError naming a prompt character outside the vocabulary.
 */
export async function sampleText(
  logits: NextLogits,
  tok: CharTokenizer,
  opts: { prompt: string; n: number; seqLen: number; temperature: number; rng: Rng },
): Promise<string> {
  let ids: number[];
  try {
    ids = tok.encode(opts.prompt);
  } catch (e) {
    throw new RangeError(
      `--prompt: ${(e as Error).message.replace(/^CharTokenizer.encode: /, "")}`,
    );
  }
  if (ids.length === 0) throw new RangeError("--prompt must not be empty");
  const V = tok.vocabSize;
  for (let i = 0; i < opts.n; i++) {
    const ctx = ids.slice(-opts.seqLen);
    const y = await logits(Float32Array.from(ctx), [1, ctx.length]);
    const last = y.subarray((ctx.length - 1) * V, ctx.length * V);
    let best = 0;
    for (let k = 1; k < V; k++) if (last[k] > last[best]) best = k;
    if (opts.temperature === 0) {
      ids.push(best);
      continue;
    }
    const p = Array.from(last, (l) => Math.exp((l - last[best]) / opts.temperature));
    let u = opts.rng.next() * p.reduce((a, b) => a + b, 0);
    let k = 0;
    while (k < V - 1 && (u -= p[k]) > 0) k++;
    ids.push(k);
  }
  return tok.decode(ids);
}
