/**
 * A key/value cache for autoregressive decoding: each new token is one
 * position's forward, attention reading the keys and values of every
 * earlier position from the cache instead of recomputing them.
 *
 * @module
 */

import type { Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { keep } from "../tensor/tidy.ts";
import { moveReshape } from "./_util.ts";
import type { Layer } from "./layer.ts";
import { Sequential } from "./sequential.ts";
import { TokenPositionEmbedding } from "./token_position_embedding.ts";
import { TransformerBlock } from "./transformer_block.ts";
import { CausalSelfAttention } from "./causal_self_attention.ts";
import { Residual } from "./residual.ts";
import { describeValue } from "../text/describe.ts";

// Layers whose output at a position depends on that position's input only.
const POSITION_WISE = new Set([
  "Linear",
  "LayerNorm",
  "RMSNorm",
  "MLP",
  "GELU",
  "ReLU",
  "SiLU",
  "Tanh",
  "Dropout",
  "TiedHead",
]);

/**
 * The keys and values of every `CausalSelfAttention` of a model (or of a
 * pipeline stage) for one batch of sequences, kept `[T, B·H, D]` per layer,
 * and the number of positions held. {@linkcode cachedForward} fills it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { cachedForward, KVCache } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const gpt = createTinyGPT({ vocabSize: 10, seqLen: 8, dim: 8, heads: 2, layers: 2, seed: 1 }, be);
 * const cache = new KVCache();
 * const prompt = be.fromData(new Float32Array([1, 2, 3]), [1, 3]);
 * cachedForward(gpt, prompt, cache).dispose(); // the prompt: positions 0..2
 * const next = be.fromData(new Float32Array([4]), [1, 1]);
 * const y = cachedForward(gpt, next, cache); // position 3 only: [1, 1, 10]
 * const all = gpt.forward(be.fromData(new Float32Array([1, 2, 3, 4]), [1, 4]), { save: false });
 * const a = await y.toArray(), b = (await all.toArray()).subarray(30);
 * assert.ok(a.every((v, i) => Math.abs(v - b[i]) < 1e-5));
 * assert.equal(cache.length, 4);
 * cache.dispose();
 * ```
 */
export class KVCache {
  readonly #kv = new Map<Layer, { k: Tensor; v: Tensor }>();
  #length = 0;

  /** Positions held (the next token's position). */
  get length(): number {
    return this.#length;
  }

  /** Bytes of the keys and values held. */
  get bytes(): number {
    let n = 0;
    for (const { k, v } of this.#kv.values()) n += k.bytes + v.bytes;
    return n;
  }

  /** @internal Keys and values of `layer` so far, or undefined. */
  get(layer: Layer): { k: Tensor; v: Tensor } | undefined {
    return this.#kv.get(layer);
  }

  /** @internal Replaces `layer`'s keys and values (disposing the old ones). */
  set(layer: Layer, k: Tensor, v: Tensor): void {
    const old = this.#kv.get(layer);
    this.#kv.set(layer, { k: keep(k), v: keep(v) });
    old?.k.dispose();
    old?.v.dispose();
  }

  /** @internal Moves the position on by `n` once a forward is complete. */
  advance(n: number): void {
    this.#length += n;
  }

  /** Frees every tensor held; the cache is empty (length 0) again. */
  dispose(): void {
    for (const { k, v } of this.#kv.values()) {
      k.dispose();
      v.dispose();
    }
    this.#kv.clear();
    this.#length = 0;
  }
}

/**
 * Throws a TypeError naming the first layer of `layer` that
 * {@linkcode cachedForward} cannot run: one that mixes positions other than
 * `CausalSelfAttention` (or holds an unknown kind).
 *
 * @example
 * ```ts
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { checkCachedForward } from "@conveyor/core/nn";
 * const gpt = createTinyGPT({ vocabSize: 10, seqLen: 8, dim: 8, heads: 2, layers: 1 }, new CpuBackend());
 * checkCachedForward(gpt); // fine: embedding, blocks, norm, head
 * gpt.dispose();
 * ```
 */
export function checkCachedForward(layer: Layer, where = "model"): void {
  if (layer instanceof Sequential) {
    layer.layers.forEach((l, i) => checkCachedForward(l, `${where} layer ${layer.names[i]}`));
  } else if (layer instanceof Residual) checkCachedForward(layer.inner, where);
  else if (
    !(layer instanceof TokenPositionEmbedding || layer instanceof TransformerBlock ||
      layer instanceof CausalSelfAttention || POSITION_WISE.has(layer.kind))
  ) {
    throw new TypeError(
      `${where} (${layer.kind}) has no cached forward (known: Sequential, Residual, ` +
        `TokenPositionEmbedding, TransformerBlock, CausalSelfAttention and position-wise layers); ` +
        "generate with cache: false",
    );
  }
}

/**
 * The forward of `x` (the next `T` positions of each sequence, after the
 * `cache.length` already held) through `layer`, nothing kept for backward,
 * each attention reading and extending its keys and values in `cache`;
 * the cache then holds `T` more positions. `x` is token ids `[B, T]` where
 * `layer` starts with a `TokenPositionEmbedding` (its positions offset by
 * `cache.length`), else the activation `[B, T, C]` of a pipeline stage.
 * A first call may carry the whole prompt (`T` ≥ 1, causal within it);
 * later calls take one position (`T` = 1). Mathematically the last
 * positions of `layer.forward` of the whole sequence.
 *
 * @example
 * ```ts
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { cachedForward, KVCache } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const gpt = createTinyGPT({ vocabSize: 10, seqLen: 8, dim: 8, heads: 2, layers: 1 }, be);
 * const cache = new KVCache();
 * const y = cachedForward(gpt, be.fromData(new Float32Array([1, 2]), [1, 2]), cache);
 * console.log(y.shape, cache.length); // [1, 2, 10] 2
 * ```
 */
export function cachedForward(layer: Layer, x: Tensor, cache: KVCache): Tensor {
  const t = x.shape[1];
  if (!(cache instanceof KVCache)) {
    throw new TypeError(`cachedForward: cache must be a KVCache, got ${describeValue(cache)}`);
  }
  if (x.shape.length < 2 || !(t >= 1)) {
    throw new RangeError(`cachedForward: x must be [B, T, …] with T ≥ 1, got [${x.shape}]`);
  }
  if (cache.length > 0 && t !== 1) {
    throw new RangeError(
      `cachedForward: after the prompt (${cache.length} positions held) take one position at a time, got T = ${t}`,
    );
  }
  // Checked with the prompt: the layers of a model do not change between its tokens.
  if (cache.length === 0) checkCachedForward(layer);
  const y = run(layer, x, cache.length, cache);
  cache.advance(t);
  return y;
}

function run(layer: Layer, x: Tensor, pos: number, cache: KVCache): Tensor {
  if (layer instanceof Sequential) {
    let h = x;
    for (const l of layer.layers) {
      const next = run(l, h, pos, cache);
      if (h !== x) h.dispose();
      h = next;
    }
    return h;
  }
  if (layer instanceof Residual) {
    const r = run(layer.inner, x, pos, cache);
    const y = ops.add(x, r);
    r.dispose();
    return y;
  }
  if (layer instanceof TokenPositionEmbedding) return embed(layer, x, pos);
  if (layer instanceof CausalSelfAttention) return attend(layer, x, cache);
  if (layer instanceof TransformerBlock) {
    const a = layer.ln1.forward(x, { save: false }); // [B, T, C]
    const att = attend(layer.attn, a, cache); // [B, T, C]
    a.dispose();
    const h = ops.add(x, att);
    att.dispose();
    const c = layer.ln2.forward(h, { save: false });
    const m = layer.mlp.forward(c, { save: false });
    c.dispose();
    const y = ops.add(h, m);
    h.dispose();
    m.dispose();
    return y;
  }
  return layer.forward(x, { save: false });
}

// Token embedding plus the positions pos … pos + T − 1.
function embed(e: TokenPositionEmbedding, ids: Tensor, pos: number): Tensor {
  const [b, t] = ids.shape;
  if (pos + t > e.maxLen) {
    throw new RangeError(
      `cachedForward: position ${pos + t - 1} is past the model's context of maxLen = ${e.maxLen}`,
    );
  }
  const p = new Float32Array(b * t);
  for (let i = 0; i < p.length; i++) p[i] = pos + (i % t);
  const pids = e.backend.fromData(p, [b, t]);
  const te = ops.embedding(e.token, ids); // [B, T, C]
  const pe = ops.embedding(e.position, pids); // [B, T, C]
  pids.dispose();
  const y = ops.add(te, pe);
  te.dispose();
  pe.dispose();
  return y;
}

// [BH, T, D] → [T, BH, D], giving up `z`.
function permuted(z: Tensor): Tensor {
  const out = ops.permute(z, [1, 0, 2]);
  z.dispose();
  return out;
}

// Attention of the new positions over the cached ones and themselves.
function attend(a: CausalSelfAttention, x: Tensor, cache: KVCache): Tensor {
  const [b, t, c] = x.shape;
  const h = a.heads, d = a.headDim, bh = b * h;
  const qkv = a.qkv.forward(x, { save: false }); // [B, T, 3C]
  const qkv5 = moveReshape(qkv, [b, t, 3, h, d]); // [B, T, 3, H, D]
  const heads = ops.permute(qkv5, [2, 0, 3, 1, 4]); // [3, B, H, T, D]
  qkv5.dispose();
  const part = (i: number) => moveReshape(ops.sliceRows(heads, i, i + 1), [bh, t, d]);
  const q = part(0), k = part(1), v = part(2); // each [BH, T, D]
  heads.dispose();
  // The cache holds [T, BH, D], so that a new position is a row appended
  // (one position: [BH, 1, D] is already laid out as [1, BH, D]).
  const rows = (z: Tensor) => t === 1 ? moveReshape(z, [1, bh, d]) : permuted(z);
  const kRows = rows(k), vRows = rows(v); // [T, BH, D]
  const held = cache.get(a);
  const kAll = held === undefined ? kRows : ops.concatRows([held.k, kRows]); // [Tk, BH, D]
  const vAll = held === undefined ? vRows : ops.concatRows([held.v, vRows]);
  if (held !== undefined) {
    kRows.dispose();
    vRows.dispose();
  }
  cache.set(a, kAll, vAll);
  const kb = ops.permute(kAll, [1, 0, 2]), vb = ops.permute(vAll, [1, 0, 2]); // [BH, Tk, D]
  ops.scaleInPlace(q, 1 / Math.sqrt(d));
  const scores = ops.matmul(q, kb, { transB: true }); // [BH, T, Tk]
  q.dispose();
  kb.dispose();
  // A prompt (nothing held before) is causal within itself; one new position sees all.
  const p = ops.softmax(scores, { causal: held === undefined && t > 1 }); // [BH, T, Tk]
  scores.dispose();
  const ctx = ops.matmul(p, vb); // [BH, T, D]
  p.dispose();
  vb.dispose();
  const ctx4 = moveReshape(ctx, [b, h, t, d]); // [B, H, T, D]
  const merged = ops.permute(ctx4, [0, 2, 1, 3]); // [B, T, H, D]
  ctx4.dispose();
  const m3 = moveReshape(merged, [b, t, c]);
  const y = a.proj.forward(m3, { save: false }); // [B, T, C]
  m3.dispose();
  return y;
}
