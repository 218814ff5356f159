/**
 * Text generation from a language model: greedy or sampled (temperature,
 * top-k, top-p, seeded), with a key/value cache or without.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import { Rng } from "../tensor/random.ts";
import type { Layer } from "./layer.ts";
import { Sequential } from "./sequential.ts";
import { TokenPositionEmbedding } from "./token_position_embedding.ts";
import { cachedForward, checkCachedForward, KVCache } from "./kv_cache.ts";
import { checkOptionSpelling } from "../text/nearest.ts";
import { describeValue } from "../text/describe.ts";

/** Options of {@linkcode generate} (and `PipelineParallelModel.generate`). */
export interface GenerationOptions {
  /** Tokens to generate per prompt (a positive integer). */
  readonly maxTokens: number;
  /** Softmax temperature, ≥ 0 (default 1); 0 is greedy: always the first largest logit. */
  readonly temperature?: number;
  /** Sample only among the `topK` largest logits (default: all). */
  readonly topK?: number;
  /** Sample only among the most likely tokens whose probabilities add up to `topP` (0 < p ≤ 1, default 1). */
  readonly topP?: number;
  /** Seed of the sampling (default 0); prompt `i` draws from its own generator, so results do not depend on batching. */
  readonly seed?: number;
  /** Token ids that end a prompt's generation (the stop id is kept as its last token). */
  readonly stop?: readonly number[];
  /** Keep keys and values per attention layer (default `true`); `false` recomputes the whole prefix for every token. */
  readonly cache?: boolean;
  /** Told each token as it is chosen: the prompt's index and the id. */
  readonly onToken?: (prompt: number, id: number) => void;
}

/** What {@linkcode generate} returns. */
export interface GenerationResult {
  /** Per prompt, the generated ids only (without the prompt). */
  readonly ids: number[][];
  /** Tokens generated over all prompts. */
  readonly tokens: number;
  /** Wall time of the call in seconds (prompts' forwards included). */
  readonly seconds: number;
  /** `tokens / seconds`. */
  readonly tokensPerSecond: number;
}

/** {@linkcode GenerationOptions} checked, with defaults. */
export interface CheckedGenerationOptions {
  /** See {@linkcode GenerationOptions}. */
  readonly maxTokens: number;
  /** See {@linkcode GenerationOptions}. */
  readonly temperature: number;
  /** See {@linkcode GenerationOptions}; Infinity for all. */
  readonly topK: number;
  /** See {@linkcode GenerationOptions}. */
  readonly topP: number;
  /** See {@linkcode GenerationOptions}. */
  readonly seed: number;
  /** See {@linkcode GenerationOptions}. */
  readonly stop: ReadonlySet<number>;
  /** See {@linkcode GenerationOptions}. */
  readonly cache: boolean;
  /** See {@linkcode GenerationOptions}. */
  readonly onToken?: (prompt: number, id: number) => void;
}

const KEYS = ["maxTokens", "temperature", "topK", "topP", "seed", "stop", "cache", "onToken"];

/**
 * Checks generation options (misspelt keys get a did-you-mean) and prompts
 * (one array of ids, or an array of them; integers ≥ 0, below `vocabSize`
 * where known; each prompt plus `maxTokens` within `maxLen` where known).
 * Throws a RangeError or TypeError naming the value and the rule.
 *
 * @example
 * ```ts
 * import { checkGeneration } from "@conveyor/core/nn";
 * const { prompts, options } = checkGeneration([1, 2], { maxTokens: 3, temperature: 0 });
 * console.log(prompts, options.topK); // [[1, 2]] Infinity
 * ```
 */
export function checkGeneration(
  prompts: readonly number[] | readonly (readonly number[])[],
  options: GenerationOptions,
  limits: { readonly vocabSize?: number; readonly maxLen?: number } = {},
): { prompts: number[][]; options: CheckedGenerationOptions } {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`generate: options must be an object, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, KEYS, "generate: ");
  const o = options;
  const int = (name: string, v: unknown, min: number) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
      throw new RangeError(
        `generate: ${name} must be an integer ≥ ${min}, got ${describeValue(v)}`,
      );
    }
    return v;
  };
  const maxTokens = int("maxTokens", o.maxTokens, 1);
  const temperature = o.temperature ?? 1;
  if (typeof temperature !== "number" || !Number.isFinite(temperature) || temperature < 0) {
    throw new RangeError(
      `generate: temperature must be a finite number ≥ 0, got ${describeValue(temperature)}`,
    );
  }
  const topK = o.topK === undefined ? Infinity : int("topK", o.topK, 1);
  const topP = o.topP ?? 1;
  if (typeof topP !== "number" || !(topP > 0 && topP <= 1)) {
    throw new RangeError(`generate: topP must be in (0, 1], got ${describeValue(topP)}`);
  }
  const seed = o.seed ?? 0;
  if (typeof seed !== "number" || !Number.isSafeInteger(seed)) {
    throw new RangeError(`generate: seed must be a safe integer, got ${describeValue(seed)}`);
  }
  const stop = o.stop ?? [];
  if (!Array.isArray(stop)) {
    throw new TypeError(`generate: stop must be an array of token ids, got ${describeValue(stop)}`);
  }
  stop.forEach((s, i) => int(`stop[${i}]`, s, 0));
  const cache = o.cache ?? true;
  if (typeof cache !== "boolean") {
    throw new TypeError(`generate: cache must be a boolean, got ${describeValue(cache)}`);
  }
  if (o.onToken !== undefined && typeof o.onToken !== "function") {
    throw new TypeError(`generate: onToken must be a function, got ${describeValue(o.onToken)}`);
  }
  if (!Array.isArray(prompts) || prompts.length === 0) {
    throw new TypeError(
      `generate: prompts must be a non-empty array of token ids, or an array of them, got ${
        describeValue(prompts)
      }`,
    );
  }
  const list = (typeof prompts[0] === "number" ? [prompts] : prompts) as unknown[];
  const out = list.map((p, i) => {
    if (!Array.isArray(p) || p.length === 0) {
      throw new TypeError(
        `generate: prompt ${i} must be a non-empty array of token ids, got ${describeValue(p)}`,
      );
    }
    p.forEach((id, j) => {
      if (
        typeof id !== "number" || !Number.isInteger(id) || id < 0 ||
        (limits.vocabSize !== undefined && id >= limits.vocabSize)
      ) {
        throw new RangeError(
          `generate: prompt ${i}[${j}] must be a token id in [0, ${
            (limits.vocabSize ?? Infinity) - 1
          }], got ${describeValue(id)}`,
        );
      }
    });
    if (limits.maxLen !== undefined && p.length + maxTokens > limits.maxLen) {
      throw new RangeError(
        `generate: prompt ${i} has ${p.length} tokens; with maxTokens = ${maxTokens} that is ${
          p.length + maxTokens
        } positions, past the model's context of ${limits.maxLen}`,
      );
    }
    return [...p as number[]];
  });
  return {
    prompts: out,
    options: {
      maxTokens,
      temperature,
      topK,
      topP,
      seed,
      stop: new Set(stop),
      cache,
      ...(o.onToken === undefined ? {} : { onToken: o.onToken }),
    },
  };
}

/**
 * The next token from `logits` (one position, `[V]`): the first largest
 * logit when `temperature` is 0; else a draw from `rng` (one `next()`) of
 * softmax(logits / temperature) restricted to the `topK` largest and then
 * to the smallest most-likely set reaching `topP`, computed in f64.
 *
 * @example
 * ```ts
 * import { Rng } from "@conveyor/core/data";
 * import { sampleToken } from "@conveyor/core/nn";
 * const logits = new Float32Array([0.1, 3, 0.2]);
 * console.log(sampleToken(logits, { temperature: 0, topK: Infinity, topP: 1 }, new Rng(0))); // 1
 * console.log(sampleToken(logits, { temperature: 1, topK: 1, topP: 1 }, new Rng(0))); // 1
 * ```
 */
export function sampleToken(
  logits: Float32Array,
  o: { readonly temperature: number; readonly topK: number; readonly topP: number },
  rng: Rng,
): number {
  if (o.temperature === 0) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    return best;
  }
  const order = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b);
  const kept = order.slice(0, Math.min(o.topK, order.length));
  const top = logits[kept[0]];
  let probs = kept.map((i) => Math.exp((logits[i] - top) / o.temperature));
  let z = probs.reduce((a, b) => a + b, 0);
  probs = probs.map((p) => p / z);
  if (o.topP < 1) {
    let acc = 0, n = 0;
    while (n < probs.length && acc < o.topP) acc += probs[n++];
    probs = probs.slice(0, n);
    z = probs.reduce((a, b) => a + b, 0);
    probs = probs.map((p) => p / z);
  }
  const u = rng.next();
  let acc = 0;
  for (let i = 0; i < probs.length; i++) {
    acc += probs[i];
    if (u < acc) return kept[i];
  }
  return kept[probs.length - 1];
}

/**
 * Runs generation for `prompts` with `logitsOf(i, newIds, sequence)`, which
 * gives the last position's logits of prompt `i` after `newIds` (the whole
 * prompt first, then one token at a time; `sequence` is everything so far):
 * the loop behind {@linkcode generate} and `PipelineParallelModel.generate`.
 * With `concurrent`, the prompts' loops run interleaved (each awaits its own
 * forwards), so a pipeline works on several prompts at once.
 *
 * @example
 * ```ts
 * import { checkGeneration, runGeneration } from "@conveyor/core/nn";
 * const { prompts, options } = checkGeneration([[0]], { maxTokens: 3, temperature: 0 });
 * // A "model" whose next token is always the last one plus 1.
 * const r = await runGeneration(prompts, options, (_i, _ids, seq) => {
 *   const l = new Float32Array(10);
 *   l[seq[seq.length - 1] + 1] = 1;
 *   return Promise.resolve(l);
 * }, false);
 * console.log(r.ids); // [[1, 2, 3]]
 * ```
 */
export async function runGeneration(
  prompts: readonly (readonly number[])[],
  o: CheckedGenerationOptions,
  logitsOf: (
    i: number,
    newIds: readonly number[],
    sequence: readonly number[],
  ) => Promise<Float32Array>,
  concurrent: boolean,
): Promise<GenerationResult> {
  const t0 = performance.now();
  const ids: number[][] = prompts.map(() => []);
  const one = async (i: number) => {
    const rng = new Rng(o.seed + i);
    const seq = [...prompts[i]];
    let fresh: readonly number[] = prompts[i];
    for (let n = 0; n < o.maxTokens; n++) {
      const logits = await logitsOf(i, fresh, seq);
      const id = sampleToken(logits, o, rng);
      ids[i].push(id);
      seq.push(id);
      o.onToken?.(i, id);
      if (o.stop.has(id)) break;
      fresh = [id];
    }
  };
  if (concurrent) await Promise.all(prompts.map((_, i) => one(i)));
  else for (let i = 0; i < prompts.length; i++) await one(i);
  const seconds = (performance.now() - t0) / 1000;
  const tokens = ids.reduce((a, x) => a + x.length, 0);
  return { ids, tokens, seconds, tokensPerSecond: tokens / seconds };
}

/** The vocabulary and context of a model that starts with a `TokenPositionEmbedding`. */
export function languageModelLimits(model: Layer): { vocabSize?: number; maxLen?: number } {
  let first: Layer = model;
  while (first instanceof Sequential) first = first.layers[0];
  return first instanceof TokenPositionEmbedding
    ? { vocabSize: first.vocabSize, maxLen: first.maxLen }
    : {};
}

/**
 * Generates `options.maxTokens` tokens after each prompt with `model` (a
 * language model taking ids `[B, T]` to logits `[B, T, V]`, such as
 * `createTinyGPT` or `loadGPT2`'s), on its own backend. With the cache
 * (default) the prompt runs once and each new token is one position's
 * forward ({@linkcode cachedForward}); with `cache: false` every token
 * recomputes the whole sequence (`model.forward`), which greedy decoding
 * matches token for token. Everything is checked before any forward
 * (options, prompts against the embedding's vocabulary and context).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { generate } from "@conveyor/core/nn";
 * const gpt = createTinyGPT({ vocabSize: 10, seqLen: 16, dim: 8, heads: 2, layers: 2, seed: 1 }, new CpuBackend());
 * const a = await generate(gpt, [1, 2, 3], { maxTokens: 5, temperature: 0 });
 * const b = await generate(gpt, [1, 2, 3], { maxTokens: 5, temperature: 0, cache: false });
 * assert.deepEqual(a.ids, b.ids);
 * const s = await generate(gpt, [[1], [4, 5]], { maxTokens: 4, temperature: 0.8, topK: 5, seed: 7 });
 * assert.deepEqual(s.ids, (await generate(gpt, [[1], [4, 5]], { maxTokens: 4, temperature: 0.8, topK: 5, seed: 7 })).ids);
 * gpt.dispose();
 * ```
 */
export async function generate(
  model: Layer,
  prompts: readonly number[] | readonly (readonly number[])[],
  options: GenerationOptions,
): Promise<GenerationResult> {
  const checked = checkGeneration(prompts, options, languageModelLimits(model));
  const o = checked.options;
  if (o.cache) checkCachedForward(model);
  const be = (model as { backend?: Backend }).backend ?? firstBackend(model);
  const caches = checked.prompts.map(() => new KVCache());
  try {
    return await runGeneration(checked.prompts, o, async (i, fresh, seq) => {
      const ids = o.cache ? fresh : seq;
      const x = be.fromData(Float32Array.from(ids), [1, ids.length]);
      let y;
      try {
        y = o.cache ? cachedForward(model, x, caches[i]) : model.forward(x, { save: false });
      } finally {
        x.dispose();
      }
      const all = await y.toArray().finally(() => y.dispose());
      const v = y.shape[y.shape.length - 1];
      return all.slice(all.length - v);
    }, false);
  } finally {
    for (const c of caches) c.dispose();
  }
}

function firstBackend(model: Layer): Backend {
  const p = model.parameters()[0];
  if (p === undefined) {
    throw new TypeError(`generate: the model has no parameters to find its backend by`);
  }
  return p.value.backend;
}

/** One token of {@linkcode streamTokens}: the prompt's index and the id. */
export interface StreamedToken {
  /** Index of the prompt it continues. */
  readonly prompt: number;
  /** The token id. */
  readonly id: number;
}

/**
 * The tokens of a generation as an async iterator, each as soon as it is
 * chosen: `start` runs the generation with the `onToken` it is given
 * (`generate` of a plain model, or `PipelineParallelModel.generate`). The
 * iterator ends with the generation (returning its result) and throws its
 * error; leaving the loop early lets the generation finish unread.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { generate, streamTokens } from "@conveyor/core/nn";
 * const gpt = createTinyGPT({ vocabSize: 10, seqLen: 16, dim: 8, heads: 2, layers: 1, seed: 1 }, new CpuBackend());
 * const seen: number[] = [];
 * for await (const t of streamTokens((onToken) => generate(gpt, [1, 2], { maxTokens: 4, temperature: 0, onToken }))) {
 *   seen.push(t.id);
 * }
 * assert.deepEqual(seen, (await generate(gpt, [1, 2], { maxTokens: 4, temperature: 0 })).ids[0]);
 * gpt.dispose();
 * ```
 */
export async function* streamTokens(
  start: (onToken: (prompt: number, id: number) => void) => Promise<GenerationResult>,
): AsyncGenerator<StreamedToken, GenerationResult | undefined> {
  const queue: StreamedToken[] = [];
  let wake: (() => void) | null = null;
  let done = false;
  let result: GenerationResult | undefined;
  let failure: { error: unknown } | null = null;
  const signal = () => {
    wake?.();
    wake = null;
  };
  start((prompt, id) => {
    queue.push({ prompt, id });
    signal();
  }).then(
    (r) => void (result = r),
    (error) => void (failure = { error }),
  ).finally(() => {
    done = true;
    signal();
  });
  while (true) {
    if (queue.length > 0) {
      yield queue.shift()!;
      continue;
    }
    if (done) break;
    await new Promise<void>((resolve) => wake = resolve);
  }
  if (failure !== null) throw (failure as { error: unknown }).error;
  return result;
}
