/**
 * A tiny GPT as a `Sequential`: embeddings, Transformer blocks, final norm
 * and a linear head, so the pipeline can cut it at block boundaries.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import { Rng } from "../tensor/random.ts";
import { checkLayerOptions, checkPositiveInt } from "./_util.ts";
import type { Layer } from "./layer.ts";
import { LayerNorm } from "./layer_norm.ts";
import { Linear } from "./linear.ts";
import { Sequential } from "./sequential.ts";
import { TokenPositionEmbedding } from "./token_position_embedding.ts";
import { TransformerBlock } from "./transformer_block.ts";
import { CausalSelfAttention } from "./causal_self_attention.ts";
import { MLP } from "./mlp.ts";
import { Residual } from "./residual.ts";
import { describeValue } from "../text/describe.ts";
import { TiedHead, tieParameters } from "./tied_head.ts";

/** Sizes of {@linkcode createTinyGPT}. */
export interface TinyGPTConfig {
  /** Number of token ids. */
  readonly vocabSize: number;
  /** Longest context (rows of the positional table). */
  readonly seqLen: number;
  /** Model width. */
  readonly dim: number;
  /** Attention heads; must divide `dim`. */
  readonly heads: number;
  /** Number of Transformer blocks. */
  readonly layers: number;
  /** Seed of the initialisation (default 0). */
  readonly seed?: number;
  /**
   * `"blocks"` (default): one `TransformerBlock` layer per block.
   * `"halves"`: each block as two layers, `Residual([LayerNorm,
   * CausalSelfAttention])` and `Residual([LayerNorm, MLP])`, with the same
   * weights and the same outputs: a pipeline can then cut inside a block,
   * which balances more stages than blocks (6 blocks in ZB-V's 4 stages).
   */
  readonly split?: "blocks" | "halves";
  /**
   * Tied input/output embeddings (default `false`): the head is a
   * `TiedHead` (no bias) whose weight is the embedding's token table, listed
   * once (as `0.token`), as GPT-2's `lm_head` is `wte`.
   */
  readonly tieEmbeddings?: boolean;
  /** Epsilon of every layer norm (default `1e-5`, GPT-2's `layer_norm_epsilon`). */
  readonly eps?: number;
  /** Hidden width of every MLP (default `4 · dim`). */
  readonly hidden?: number;
}

/**
 * Builds `[TokenPositionEmbedding, TransformerBlock × layers, LayerNorm,
 * Linear head]` (a `TiedHead` sharing the token table with `tieEmbeddings`): input token ids `[B, T]` (T ≤ seqLen), output logits
 * `[B, T, vocabSize]`. All weights come from one `Rng(seed)` in layer order,
 * so the same config gives the same model on every backend. The head starts
 * small (std 0.02), so the initial loss is close to ln(vocabSize).
 *
 * @example
 * ```ts
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * const be = new CpuBackend();
 * const gpt = createTinyGPT({ vocabSize: 10, seqLen: 8, dim: 8, heads: 2, layers: 1, seed: 1 }, be);
 * console.log(gpt.layers.map((l) => l.kind)); // ["TokenPositionEmbedding", "TransformerBlock", "LayerNorm", "Linear"]
 * console.log(gpt.outputShape([2, 8])); // [2, 8, 10]
 * gpt.dispose();
 * ```
 */
export function createTinyGPT(config: TinyGPTConfig, backend: Backend): Sequential {
  if (config === null || typeof config !== "object") {
    throw new TypeError(`createTinyGPT: config must be an object, got ${describeValue(config)}`);
  }
  checkLayerOptions("createTinyGPT", config, [
    "vocabSize",
    "seqLen",
    "dim",
    "heads",
    "layers",
    "seed",
    "split",
  ]);
  const { vocabSize, seqLen, dim, heads, layers } = config;
  checkPositiveInt("createTinyGPT", "vocabSize", vocabSize);
  checkPositiveInt("createTinyGPT", "seqLen", seqLen);
  checkPositiveInt("createTinyGPT", "dim", dim);
  checkPositiveInt("createTinyGPT", "heads", heads);
  checkPositiveInt("createTinyGPT", "layers", layers);
  if (dim % heads !== 0) {
    throw new RangeError(
      `createTinyGPT: heads must divide dim, got heads = ${heads} and dim = ${dim}`,
    );
  }
  const split = config.split ?? "blocks";
  if (split !== "blocks" && split !== "halves") {
    throw new RangeError(
      `createTinyGPT: split must be "blocks" or "halves", got ${describeValue(split)}`,
    );
  }
  const tie = config.tieEmbeddings ?? false;
  if (typeof tie !== "boolean") {
    throw new TypeError(
      `createTinyGPT: tieEmbeddings must be a boolean, got ${describeValue(config.tieEmbeddings)}`,
    );
  }
  const eps = config.eps ?? 1e-5;
  if (typeof eps !== "number" || !(eps > 0) || !Number.isFinite(eps)) {
    throw new RangeError(
      `createTinyGPT: eps must be a finite number > 0, got ${describeValue(eps)}`,
    );
  }
  const hidden = config.hidden ?? 4 * dim;
  checkPositiveInt("createTinyGPT", "hidden", hidden);
  const rng = new Rng(config.seed ?? 0);
  const list: Layer[] = [new TokenPositionEmbedding(backend, vocabSize, seqLen, dim, { rng })];
  for (let i = 0; i < layers; i++) {
    if (split === "blocks") {
      list.push(new TransformerBlock(backend, dim, heads, { rng, eps, hidden }));
      continue;
    }
    // TransformerBlock's sublayers, drawn from the rng in the same order.
    const ln1 = new LayerNorm(backend, dim, { eps });
    const attn = new CausalSelfAttention(backend, dim, heads, { rng });
    list.push(new Residual(backend, new Sequential([ln1, attn], { names: ["ln1", "attn"] })));
    const ln2 = new LayerNorm(backend, dim, { eps });
    const mlp = new MLP(backend, dim, { rng, hidden });
    list.push(new Residual(backend, new Sequential([ln2, mlp], { names: ["ln2", "mlp"] })));
  }
  list.push(new LayerNorm(backend, dim, { eps }));
  list.push(
    tie
      ? new TiedHead(backend, vocabSize, dim, { tiedTo: "0.token" })
      : new Linear(backend, dim, vocabSize, { rng, initScale: 0.02 }),
  );
  const model = new Sequential(list, { inputShape: [1, seqLen] });
  tieParameters([model]);
  return model;
}
