/**
 * For the GPT-2 tests: a tiny random GPT-2 folder in Hugging Face's layout
 * (written here, no network), and an independent float64 GPT-2 forward
 * straight from those tensors (HF names, Conv1D weights [in, out]), as
 * `modeling_gpt2.py` computes it: pre-norm blocks, GELU tanh approximation,
 * causal softmax attention scaled by 1/√D, tied lm_head = wte.
 *
 * @module
 */

import { encodeSafetensors } from "../../src/nn/safetensors.ts";
import { BPETokenizer } from "../../src/nn/bpe_tokenizer.ts";
import { Rng } from "../../src/tensor/random.ts";

type T = Map<string, { shape: number[]; data: Float32Array }>;

export interface TinyGPT2 {
  readonly vocab: number;
  readonly positions: number;
  readonly embd: number;
  readonly heads: number;
  readonly layers: number;
}

export const TINY: TinyGPT2 = { vocab: 300, positions: 96, embd: 16, heads: 2, layers: 2 };

/** GPT-2's tensors of `c`, random (std 0.02 for the matrices and tables, 0.1 for norms' and biases' spread). */
export function gpt2Tensors(
  c: TinyGPT2,
  seed = 1,
): Map<string, { shape: number[]; data: Float32Array }> {
  const rng = new Rng(seed);
  const C = c.embd;
  const t = new Map<string, { shape: number[]; data: Float32Array }>();
  const add = (name: string, shape: number[], std: number, mean = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = mean + std * rng.normal();
    t.set(name, { shape, data });
  };
  add("wte.weight", [c.vocab, C], 0.3);
  add("wpe.weight", [c.positions, C], 0.1);
  for (let i = 0; i < c.layers; i++) {
    const h = `h.${i}.`;
    add(h + "ln_1.weight", [C], 0.1, 1);
    add(h + "ln_1.bias", [C], 0.1);
    add(h + "attn.c_attn.weight", [C, 3 * C], 0.3);
    add(h + "attn.c_attn.bias", [3 * C], 0.1);
    add(h + "attn.c_proj.weight", [C, C], 0.3);
    add(h + "attn.c_proj.bias", [C], 0.1);
    add(h + "ln_2.weight", [C], 0.1, 1);
    add(h + "ln_2.bias", [C], 0.1);
    add(h + "mlp.c_fc.weight", [C, 4 * C], 0.3);
    add(h + "mlp.c_fc.bias", [4 * C], 0.1);
    add(h + "mlp.c_proj.weight", [4 * C, C], 0.3);
    add(h + "mlp.c_proj.bias", [C], 0.1);
  }
  add("ln_f.weight", [C], 0.1, 1);
  add("ln_f.bias", [C], 0.1);
  return t;
}

export function configJson(c: TinyGPT2): Record<string, unknown> {
  return {
    architectures: ["GPT2LMHeadModel"],
    model_type: "gpt2",
    activation_function: "gelu_new",
    vocab_size: c.vocab,
    n_positions: c.positions,
    n_ctx: c.positions,
    n_embd: c.embd,
    n_head: c.heads,
    n_layer: c.layers,
    n_inner: null,
    layer_norm_epsilon: 1e-5,
    resid_pdrop: 0.1,
    tie_word_embeddings: true,
  };
}

/** A byte-level vocabulary of `vocab` ids: the 256 byte symbols and merges of frequent pairs. */
export function tinyTokenizerFiles(vocab: number): { vocabJson: string; mergesTxt: string } {
  const v: Record<string, number> = {};
  for (const s of BPETokenizer.byteSymbols()) v[s] = Object.keys(v).length;
  const merges: string[] = [];
  const text = "the quick brown fox jumps over the lazy dog and then the fox sleeps in the sun";
  const words = text.split(" ").map((w, i) => (i === 0 ? w : "Ġ" + w));
  // Greedy merges of the most frequent pair, as BPE training would.
  let seqs = words.map((w) => [...w]);
  while (Object.keys(v).length < vocab - 1) {
    const counts = new Map<string, number>();
    for (const s of seqs) {
      for (let i = 0; i + 1 < s.length; i++) {
        const k = `${s[i]} ${s[i + 1]}`;
        counts.set(k, (counts.get(k) ?? 0) + 1);
      }
    }
    if (counts.size === 0) break;
    const [best] = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0];
    const [a, b] = best.split(" ");
    merges.push(best);
    v[a + b] = Object.keys(v).length;
    seqs = seqs.map((s) => {
      const out: string[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) {
          out.push(a + b);
          i++;
        } else out.push(s[i]);
      }
      return out;
    });
  }
  v["<|endoftext|>"] = Object.keys(v).length;
  return { vocabJson: JSON.stringify(v), mergesTxt: "#version: 0.2\n" + merges.join("\n") + "\n" };
}

/**
 * Writes a GPT-2 folder of `c` into `dir`: names with the `transformer.`
 * prefix, the old `attn.bias` / `attn.masked_bias` buffers, `lm_head.weight`
 * equal to `wte`, and a tokenizer when `tokenizer`.
 */
export async function writeTinyGPT2(
  dir: string,
  c: TinyGPT2 = TINY,
  seed = 1,
  tokenizer = true,
): Promise<T> {
  const t = gpt2Tensors(c, seed);
  const list = [...t].map(([name, e]) => ({
    name: "transformer." + name,
    shape: e.shape,
    data: e.data,
  }));
  for (let i = 0; i < c.layers; i++) {
    list.push({
      name: `transformer.h.${i}.attn.bias`,
      shape: [1, 1, 4, 4],
      data: new Float32Array(16).fill(1),
    });
    list.push({
      name: `transformer.h.${i}.attn.masked_bias`,
      shape: [],
      data: new Float32Array([-1e4]),
    });
  }
  list.push({
    name: "lm_head.weight",
    shape: t.get("wte.weight")!.shape,
    data: t.get("wte.weight")!.data,
  });
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(configJson(c)));
  await Deno.writeFile(
    `${dir}/model.safetensors`,
    encodeSafetensors(list, { metadata: { format: "pt" } }),
  );
  if (tokenizer) {
    const f = tinyTokenizerFiles(c.vocab);
    await Deno.writeTextFile(`${dir}/vocab.json`, f.vocabJson);
    await Deno.writeTextFile(`${dir}/merges.txt`, f.mergesTxt);
  }
  return t;
}

/** GPT-2's tensors as float64 (perturbable by less than an f32 step). */
export type T64 = Map<string, { shape: number[]; data: Float32Array | Float64Array }>;

/** Float64 logits [T, V] of GPT-2 for `ids`, from GPT-2's own tensors. */
export function referenceLogits(t: T64, c: TinyGPT2, ids: readonly number[]): Float64Array[] {
  const C = c.embd, H = c.heads, D = C / H;
  const g = (name: string) => t.get(name)!.data;
  type W = Float32Array | Float64Array;
  const layerNorm = (x: Float64Array, w: W, b: W) => {
    let m = 0;
    for (const v of x) m += v;
    m /= C;
    let s = 0;
    for (const v of x) s += (v - m) * (v - m);
    const r = 1 / Math.sqrt(s / C + 1e-5);
    return Float64Array.from(x, (v, i) => (v - m) * r * w[i] + b[i]);
  };
  // Conv1D: y = x W + b, W [in, out].
  const conv = (x: Float64Array, w: W, b: W, out: number) => {
    const y = Float64Array.from(b);
    for (let i = 0; i < x.length; i++) for (let j = 0; j < out; j++) y[j] += x[i] * w[i * out + j];
    return y;
  };
  const gelu = (x: number) =>
    0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
  let h = ids.map((id, p) => {
    const e = new Float64Array(C);
    for (let k = 0; k < C; k++) e[k] = g("wte.weight")[id * C + k] + g("wpe.weight")[p * C + k];
    return e;
  });
  for (let l = 0; l < c.layers; l++) {
    const p = `h.${l}.`;
    const qkv = h.map((x) =>
      conv(
        layerNorm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias")),
        g(p + "attn.c_attn.weight"),
        g(p + "attn.c_attn.bias"),
        3 * C,
      )
    );
    const att = h.map((_, i) => {
      const out = new Float64Array(C);
      for (let hd = 0; hd < H; hd++) {
        const sc: number[] = [];
        for (let j = 0; j <= i; j++) {
          let s = 0;
          for (let d = 0; d < D; d++) s += qkv[i][hd * D + d] * qkv[j][C + hd * D + d];
          sc.push(s / Math.sqrt(D));
        }
        const mx = Math.max(...sc);
        const e = sc.map((s) => Math.exp(s - mx));
        const z = e.reduce((a, b) => a + b, 0);
        for (let j = 0; j <= i; j++) {
          for (let d = 0; d < D; d++) out[hd * D + d] += (e[j] / z) * qkv[j][2 * C + hd * D + d];
        }
      }
      return conv(out, g(p + "attn.c_proj.weight"), g(p + "attn.c_proj.bias"), C);
    });
    h = h.map((x, i) => x.map((v, k) => v + att[i][k]));
    h = h.map((x) => {
      const a = conv(
        layerNorm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias")),
        g(p + "mlp.c_fc.weight"),
        g(p + "mlp.c_fc.bias"),
        4 * C,
      )
        .map(gelu);
      const m = conv(a, g(p + "mlp.c_proj.weight"), g(p + "mlp.c_proj.bias"), C);
      return x.map((v, k) => v + m[k]);
    });
  }
  const wte = g("wte.weight");
  return h.map((x) => {
    const y = layerNorm(x, g("ln_f.weight"), g("ln_f.bias"));
    const out = new Float64Array(c.vocab);
    for (let v = 0; v < c.vocab; v++) {
      let s = 0;
      for (let k = 0; k < C; k++) s += y[k] * wte[v * C + k];
      out[v] = s;
    }
    return out;
  });
}

/** Greedy continuation of `prompt` by `maxTokens` tokens with the float64 reference. */
export function referenceGreedy(
  t: T,
  c: TinyGPT2,
  prompt: readonly number[],
  maxTokens: number,
): number[] {
  const seq = [...prompt];
  const out: number[] = [];
  for (let i = 0; i < maxTokens; i++) {
    const logits = referenceLogits(t, c, seq);
    const last = logits[logits.length - 1];
    let best = 0;
    for (let v = 1; v < last.length; v++) if (last[v] > last[best]) best = v;
    out.push(best);
    seq.push(best);
  }
  return out;
}
