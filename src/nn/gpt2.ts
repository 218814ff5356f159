/**
 * GPT-2 checkpoints in Hugging Face's layout: `config.json` and
 * `model.safetensors` read into a `createTinyGPT` model with tied
 * embeddings, and written back in the same layout.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { withoutRandomInit } from "../tensor/random.ts";
import { createTinyGPT } from "./gpt.ts";
import type { Sequential } from "./sequential.ts";
import {
  decodeSafetensors,
  encodeSafetensors,
  parseSafetensors,
  type SafetensorsTensor,
  saveSafetensors,
} from "./safetensors.ts";
import { BPETokenizer } from "./bpe_tokenizer.ts";
import { describeValue } from "../text/describe.ts";

/** The sizes of a GPT-2 model, from its `config.json`. */
export interface GPT2Config {
  /** `vocab_size`. */
  readonly vocabSize: number;
  /** `n_positions`: the longest context. */
  readonly nPositions: number;
  /** `n_embd`: the width. */
  readonly nEmbd: number;
  /** `n_head`: attention heads (divides `nEmbd`). */
  readonly nHead: number;
  /** `n_layer`: Transformer blocks. */
  readonly nLayer: number;
  /** `n_inner`: the MLP's hidden width (`4 · nEmbd` where the file has null). */
  readonly nInner: number;
  /** `layer_norm_epsilon` (default `1e-5`). */
  readonly layerNormEpsilon: number;
}

function field(c: Record<string, unknown>, key: string, where: string): number {
  const v = c[key];
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
    throw new RangeError(`${where}: ${key} must be a positive integer, got ${describeValue(v)}`);
  }
  return v;
}

/**
 * Checks a parsed GPT-2 `config.json` and returns its sizes. Throws a
 * RangeError or TypeError naming the field: `model_type` other than
 * `"gpt2"`, a size that is not a positive integer, `n_embd` not a multiple
 * of `n_head`, an `activation_function` other than GELU's tanh
 * approximation (`"gelu_new"`, `"gelu_pytorch_tanh"`), untied embeddings
 * (`tie_word_embeddings: false`), or attention variants this model lacks
 * (`scale_attn_weights: false`, `scale_attn_by_inverse_layer_idx: true`).
 *
 * @example
 * ```ts
 * import { parseGPT2Config } from "@conveyor/core/format";
 * const c = parseGPT2Config({
 *   model_type: "gpt2", vocab_size: 50257, n_positions: 1024, n_embd: 768, n_head: 12, n_layer: 12,
 * });
 * console.log(c.nInner, c.layerNormEpsilon); // 3072 0.00001
 * ```
 */
export function parseGPT2Config(json: unknown, where = "config.json"): GPT2Config {
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new TypeError(`${where}: must be a JSON object, got ${describeValue(json)}`);
  }
  const c = json as Record<string, unknown>;
  if (c.model_type !== "gpt2") {
    throw new RangeError(
      `${where}: model_type must be "gpt2", got ${describeValue(c.model_type)}`,
    );
  }
  const nEmbd = field(c, "n_embd", where), nHead = field(c, "n_head", where);
  if (nEmbd % nHead !== 0) {
    throw new RangeError(`${where}: n_head = ${nHead} must divide n_embd = ${nEmbd}`);
  }
  const act = c.activation_function ?? "gelu_new";
  if (act !== "gelu_new" && act !== "gelu_pytorch_tanh") {
    throw new RangeError(
      `${where}: activation_function must be "gelu_new" (GELU, tanh approximation), got ${
        describeValue(act)
      }`,
    );
  }
  const rules: [string, unknown][] = [
    ["tie_word_embeddings", true],
    ["scale_attn_weights", true],
    ["scale_attn_by_inverse_layer_idx", false],
  ];
  for (const [key, want] of rules) {
    if (c[key] !== undefined && c[key] !== want) {
      throw new RangeError(`${where}: ${key} must be ${want}, got ${describeValue(c[key])}`);
    }
  }
  const eps = c.layer_norm_epsilon ?? 1e-5;
  if (typeof eps !== "number" || !(eps > 0) || !Number.isFinite(eps)) {
    throw new RangeError(
      `${where}: layer_norm_epsilon must be a finite number > 0, got ${describeValue(eps)}`,
    );
  }
  return {
    vocabSize: field(c, "vocab_size", where),
    nPositions: field(c, "n_positions", where),
    nEmbd,
    nHead,
    nLayer: field(c, "n_layer", where),
    nInner: c.n_inner === undefined || c.n_inner === null ? 4 * nEmbd : field(c, "n_inner", where),
    layerNormEpsilon: eps,
  };
}

/**
 * A `config.json` object for `config`, as Hugging Face's `GPT2Config`
 * writes one (`architectures: ["GPT2LMHeadModel"]`).
 *
 * @example
 * ```ts
 * import { gpt2ConfigJson, parseGPT2Config } from "@conveyor/core/format";
 * const c = { vocabSize: 10, nPositions: 8, nEmbd: 4, nHead: 2, nLayer: 1, nInner: 16, layerNormEpsilon: 1e-5 };
 * console.log(parseGPT2Config(gpt2ConfigJson(c)).nEmbd); // 4
 * ```
 */
export function gpt2ConfigJson(config: GPT2Config): Record<string, unknown> {
  return {
    architectures: ["GPT2LMHeadModel"],
    model_type: "gpt2",
    activation_function: "gelu_new",
    vocab_size: config.vocabSize,
    n_positions: config.nPositions,
    n_ctx: config.nPositions,
    n_embd: config.nEmbd,
    n_head: config.nHead,
    n_layer: config.nLayer,
    n_inner: config.nInner === 4 * config.nEmbd ? null : config.nInner,
    layer_norm_epsilon: config.layerNormEpsilon,
    tie_word_embeddings: true,
    scale_attn_weights: true,
    bos_token_id: config.vocabSize - 1,
    eos_token_id: config.vocabSize - 1,
  };
}

/**
 * The model of `config`, with fresh weights (seed `seed`): `createTinyGPT`
 * with tied embeddings, whose layers GPT-2's tensors map onto.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { createGPT2 } from "@conveyor/core/format";
 * const c = { vocabSize: 10, nPositions: 8, nEmbd: 4, nHead: 2, nLayer: 1, nInner: 16, layerNormEpsilon: 1e-5 };
 * const m = createGPT2(c, new CpuBackend());
 * console.log(m.layers.map((l) => l.kind)); // ["TokenPositionEmbedding", "TransformerBlock", "LayerNorm", "TiedHead"]
 * m.dispose();
 * ```
 */
export function createGPT2(config: GPT2Config, backend: Backend, seed = 0): Sequential {
  return createTinyGPT({
    vocabSize: config.vocabSize,
    seqLen: config.nPositions,
    dim: config.nEmbd,
    heads: config.nHead,
    layers: config.nLayer,
    hidden: config.nInner,
    eps: config.layerNormEpsilon,
    tieEmbeddings: true,
    seed,
  }, backend);
}

/** One GPT-2 tensor: its name (no prefix), Conveyor's name, shape, and whether it is a Conv1D weight. */
interface Slot {
  readonly hf: string;
  readonly ours: string;
  readonly shape: readonly number[]; // as GPT-2 stores it
  readonly conv: boolean; // [in, out] there, [out, in] here
}

function slots(c: GPT2Config): Slot[] {
  const C = c.nEmbd, H = c.nInner;
  const out: Slot[] = [
    { hf: "wte.weight", ours: "0.token", shape: [c.vocabSize, C], conv: false },
    { hf: "wpe.weight", ours: "0.position", shape: [c.nPositions, C], conv: false },
  ];
  for (let i = 0; i < c.nLayer; i++) {
    const h = `h.${i}.`, b = `${i + 1}.`;
    const add = (hf: string, ours: string, shape: number[], conv = false) =>
      out.push({ hf: h + hf, ours: b + ours, shape, conv });
    add("ln_1.weight", "ln1.weight", [C]);
    add("ln_1.bias", "ln1.bias", [C]);
    add("attn.c_attn.weight", "attn.qkv.weight", [C, 3 * C], true);
    add("attn.c_attn.bias", "attn.qkv.bias", [3 * C]);
    add("attn.c_proj.weight", "attn.proj.weight", [C, C], true);
    add("attn.c_proj.bias", "attn.proj.bias", [C]);
    add("ln_2.weight", "ln2.weight", [C]);
    add("ln_2.bias", "ln2.bias", [C]);
    add("mlp.c_fc.weight", "mlp.fc.weight", [C, H], true);
    add("mlp.c_fc.bias", "mlp.fc.bias", [H]);
    add("mlp.c_proj.weight", "mlp.proj.weight", [H, C], true);
    add("mlp.c_proj.bias", "mlp.proj.bias", [C]);
  }
  const f = `${c.nLayer + 1}.`;
  out.push({ hf: "ln_f.weight", ours: `${f}weight`, shape: [C], conv: false });
  out.push({ hf: "ln_f.bias", ours: `${f}bias`, shape: [C], conv: false });
  return out;
}

function transpose(a: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(a.length);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out[c * rows + r] = a[r * cols + c];
  }
  return out;
}

const fmt = (s: readonly number[]) => `[${s.join(", ")}]`;

/**
 * GPT-2's tensors (a parsed `model.safetensors`: names as the Hugging Face
 * layout spells them, with or without the `transformer.` prefix) as
 * Conveyor's parameters of {@linkcode createGPT2}'s model, Conv1D weights
 * transposed to `[out, in]`. Everything is checked before any tensor is
 * converted: every tensor present with its shape, `lm_head.weight` absent
 * or equal to `wte.weight`, no other tensor than the `attn.bias` /
 * `attn.masked_bias` buffers (ignored); a RangeError names the tensor.
 *
 * @example
 * ```ts
 * import { fromGPT2Tensors } from "@conveyor/core/format";
 * const c = { vocabSize: 3, nPositions: 2, nEmbd: 2, nHead: 1, nLayer: 0, nInner: 8, layerNormEpsilon: 1e-5 };
 * const t = (shape: number[]) => ({ shape, data: new Float32Array(shape.reduce((a, b) => a * b)) });
 * const file = new Map([
 *   ["transformer.wte.weight", t([3, 2])], ["transformer.wpe.weight", t([2, 2])],
 *   ["transformer.ln_f.weight", t([2])], ["transformer.ln_f.bias", t([2])],
 * ]);
 * console.log(fromGPT2Tensors(file, c).map((x) => x.name)); // ["0.token", "0.position", "1.weight", "1.bias"]
 * ```
 */
export function fromGPT2Tensors(
  tensors: ReadonlyMap<string, { readonly shape: readonly number[]; readonly data: Float32Array }>,
  config: GPT2Config,
  where = "model.safetensors",
): SafetensorsTensor[] {
  const list = slots(config);
  const known = new Set(list.map((s) => s.hf));
  const found = new Map<string, { shape: readonly number[]; data: Float32Array }>();
  let lmHead: { shape: readonly number[]; data: Float32Array } | undefined;
  for (const [name, t] of tensors) {
    const bare = name.startsWith("transformer.") ? name.slice("transformer.".length) : name;
    if (bare === "lm_head.weight") {
      lmHead = t;
      continue;
    }
    if (/^h\.\d+\.attn\.(bias|masked_bias)$/.test(bare)) continue;
    if (!known.has(bare)) {
      throw new RangeError(
        `${where}: tensor ${name} is not part of GPT-2's layout for this config`,
      );
    }
    if (found.has(bare)) {
      throw new RangeError(
        `${where}: tensor ${bare} is there twice (with and without "transformer.")`,
      );
    }
    found.set(bare, t);
  }
  for (const s of list) {
    const t = found.get(s.hf);
    if (t === undefined) throw new RangeError(`${where}: tensor ${s.hf} is missing`);
    if (t.shape.length !== s.shape.length || t.shape.some((d, i) => d !== s.shape[i])) {
      throw new RangeError(
        `${where}: tensor ${s.hf} must have shape ${fmt(s.shape)} for this config, got ${
          fmt(t.shape)
        }`,
      );
    }
  }
  if (lmHead !== undefined) {
    const wte = found.get("wte.weight")!.data;
    if (lmHead.data.length !== wte.length || lmHead.data.some((v, i) => v !== wte[i])) {
      throw new RangeError(
        `${where}: lm_head.weight differs from wte.weight; only tied embeddings (lm_head = wte) are read`,
      );
    }
  }
  return list.map((s) => {
    const t = found.get(s.hf)!;
    return s.conv
      ? {
        name: s.ours,
        shape: [s.shape[1], s.shape[0]],
        data: transpose(t.data, s.shape[0], s.shape[1]),
      }
      : { name: s.ours, shape: [...s.shape], data: t.data };
  });
}

/**
 * Conveyor's parameters of {@linkcode createGPT2}'s model (by name, as a
 * model's safetensors file holds them) as GPT-2's tensors, Conv1D weights
 * transposed back to `[in, out]`, named as GPT-2 names them, after
 * `prefix` (default none; `"transformer."` as `GPT2LMHeadModel` saves
 * them). A RangeError names a missing or misshapen parameter.
 *
 * @example
 * ```ts
 * import { toGPT2Tensors } from "@conveyor/core/format";
 * const c = { vocabSize: 3, nPositions: 2, nEmbd: 2, nHead: 1, nLayer: 0, nInner: 8, layerNormEpsilon: 1e-5 };
 * const z = (n: number) => new Float32Array(n);
 * const ours = new Map([["0.token", z(6)], ["0.position", z(4)], ["1.weight", z(2)], ["1.bias", z(2)]]);
 * console.log(toGPT2Tensors(ours, c).map((t) => t.name)); // ["wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"]
 * ```
 */
export function toGPT2Tensors(
  params: ReadonlyMap<string, Float32Array>,
  config: GPT2Config,
  prefix = "",
): SafetensorsTensor[] {
  return slots(config).map((s) => {
    const data = params.get(s.ours);
    const n = s.shape.reduce((a, b) => a * b, 1);
    if (data === undefined || data.length !== n) {
      throw new RangeError(
        `GPT-2: parameter ${s.ours} (${s.hf}) must hold ${n} values, got ${
          data === undefined ? "none" : data.length
        }`,
      );
    }
    return {
      name: prefix + s.hf,
      shape: [...s.shape],
      data: s.conv ? transpose(data, s.shape[1], s.shape[0]) : data,
    };
  });
}

/** What {@linkcode loadGPT2} returns. */
export interface LoadedGPT2 {
  /** The model (tied embeddings), holding the file's weights. */
  readonly model: Sequential;
  /** The sizes from `config.json`. */
  readonly config: GPT2Config;
  /** The tokenizer of `vocab.json` + `merges.txt`, or null where the folder has none. */
  readonly tokenizer: BPETokenizer | null;
}

function inFolder(dir: string | URL, name: string): string | URL {
  if (typeof dir !== "string") return new URL(name, dir.href.endsWith("/") ? dir : `${dir.href}/`);
  return `${dir.replace(/\/+$/, "")}/${name}`;
}

async function exists(p: string | URL): Promise<boolean> {
  try {
    await Deno.stat(p);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/**
 * Reads a GPT-2 folder in Hugging Face's layout: `config.json` (checked by
 * {@linkcode parseGPT2Config}), `model.safetensors` (checked by
 * {@linkcode fromGPT2Tensors}: every tensor with its shape, F32) and, when
 * both are there, `vocab.json` + `merges.txt` (a {@linkcode BPETokenizer}).
 * Everything is read and checked before the model is built; a refused
 * folder builds nothing. The tokenizer's vocabulary must not exceed
 * `vocab_size`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { loadGPT2, saveGPT2 } from "@conveyor/core/format";
 * const be = new CpuBackend();
 * const dir = await Deno.makeTempDir();
 * const gpt = createTinyGPT({ vocabSize: 12, seqLen: 8, dim: 8, heads: 2, layers: 1, tieEmbeddings: true }, be);
 * await saveGPT2(dir, gpt);
 * const { model, config, tokenizer } = await loadGPT2(dir, be);
 * assert.equal(config.nLayer, 1);
 * assert.equal(tokenizer, null);
 * const ids = be.fromData(new Float32Array([1, 2, 3]), [1, 3]);
 * assert.deepEqual(await model.forward(ids, { save: false }).toArray(), await gpt.forward(ids, { save: false }).toArray());
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function loadGPT2(dir: string | URL, backend: Backend): Promise<LoadedGPT2> {
  const cfgPath = inFolder(dir, "config.json");
  let text: string;
  try {
    text = await Deno.readTextFile(cfgPath);
  } catch (e) {
    throw new TypeError(`GPT-2 folder ${dir}: cannot read config.json (${(e as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new TypeError(`${cfgPath}: not JSON (${(e as Error).message})`);
  }
  const config = parseGPT2Config(json, String(cfgPath));
  const wPath = inFolder(dir, "model.safetensors");
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(wPath);
  } catch (e) {
    throw new TypeError(
      `GPT-2 folder ${dir}: cannot read model.safetensors (${(e as Error).message})`,
    );
  }
  const { file, verify } = decodeSafetensors(bytes);
  const tensors = fromGPT2Tensors(file.tensors, config, String(wPath));
  verify();
  const vocab = inFolder(dir, "vocab.json"), merges = inFolder(dir, "merges.txt");
  let tokenizer: BPETokenizer | null = null;
  if (await exists(vocab) && await exists(merges)) {
    tokenizer = await BPETokenizer.fromFolder(dir);
    if (tokenizer.vocabSize > config.vocabSize) {
      throw new RangeError(
        `${vocab}: ${tokenizer.vocabSize} ids, more than config.json's vocab_size = ${config.vocabSize}`,
      );
    }
  }
  // Every weight is the file's: none is drawn first.
  const model = withoutRandomInit(() => createGPT2(config, backend));
  try {
    const byName = new Map(tensors.map((t) => [t.name, t]));
    for (const p of model.parameters()) {
      const t = byName.get(p.name)!;
      const src = backend.fromData(t.data, [...t.shape]);
      ops.copyInPlace(p.value, src);
      src.dispose();
    }
  } catch (e) {
    model.dispose();
    throw e;
  }
  return { model, config, tokenizer };
}

/** Options of {@linkcode saveGPT2}. */
export interface SaveGPT2Options {
  /** The config to write; by default read off the model's layers. */
  readonly config?: GPT2Config;
  /** Written as `vocab.json` + `merges.txt` beside the weights. */
  readonly tokenizerFiles?: { readonly vocabJson: string; readonly mergesTxt: string };
}

/**
 * The GPT-2 sizes of a `createGPT2` / tied `createTinyGPT` model, read off
 * its layers; a TypeError where the model is not of that shape.
 *
 * @example
 * ```ts
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { gpt2ConfigOf } from "@conveyor/core/format";
 * const gpt = createTinyGPT({ vocabSize: 12, seqLen: 8, dim: 8, heads: 2, layers: 1, tieEmbeddings: true }, new CpuBackend());
 * console.log(gpt2ConfigOf(gpt).nInner); // 32
 * ```
 */
export function gpt2ConfigOf(model: Sequential): GPT2Config {
  const spec = model.spec();
  const layers = spec.args.layers as { kind: string; args: Record<string, unknown> }[];
  const kinds = layers.map((l) => l.kind);
  const n = layers.length;
  if (
    kinds[0] !== "TokenPositionEmbedding" || kinds[n - 1] !== "TiedHead" ||
    kinds[n - 2] !== "LayerNorm" || kinds.slice(1, n - 2).some((k) => k !== "TransformerBlock")
  ) {
    throw new TypeError(
      `GPT-2: the model must be [TokenPositionEmbedding, TransformerBlock…, LayerNorm, TiedHead] ` +
        `(createTinyGPT with tieEmbeddings and split "blocks"), got [${kinds.join(", ")}]`,
    );
  }
  const emb = layers[0].args, ln = layers[n - 2].args;
  const block = layers[1]?.args;
  return {
    vocabSize: emb.vocabSize as number,
    nPositions: emb.maxLen as number,
    nEmbd: emb.dim as number,
    nHead: (block?.heads as number) ?? 1,
    nLayer: n - 3,
    nInner: (block?.hidden as number) ?? 4 * (emb.dim as number),
    layerNormEpsilon: ln.eps as number,
  };
}

/**
 * Writes `source` — a `createGPT2` / tied `createTinyGPT` model, or the
 * bytes of such a model's safetensors file (as
 * `PipelineParallelModel.saveSafetensors` gives them) with `options.config`
 * — as a GPT-2 folder in Hugging Face's layout: `config.json` and
 * `model.safetensors` (GPT-2's names without prefix, Conv1D weights
 * `[in, out]`, no `lm_head.weight`: tied), plus the tokenizer's files
 * when given. The folder is created when missing.
 *
 * @example
 * ```ts
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { saveGPT2 } from "@conveyor/core/format";
 * const dir = await Deno.makeTempDir();
 * const gpt = createTinyGPT({ vocabSize: 12, seqLen: 8, dim: 8, heads: 2, layers: 1, tieEmbeddings: true }, new CpuBackend());
 * await saveGPT2(dir, gpt);
 * console.log(JSON.parse(await Deno.readTextFile(`${dir}/config.json`)).n_layer); // 1
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function saveGPT2(
  dir: string | URL,
  source: Sequential | Uint8Array,
  options?: SaveGPT2Options,
): Promise<void> {
  let params: Map<string, Float32Array>;
  let config: GPT2Config;
  if (source instanceof Uint8Array) {
    if (options?.config === undefined) {
      throw new TypeError("saveGPT2: a safetensors source needs options.config");
    }
    config = options.config;
    params = new Map([...parseSafetensors(source).tensors].map(([k, e]) => [k, e.data]));
  } else {
    config = options?.config ?? gpt2ConfigOf(source);
    params = new Map(
      [...parseSafetensors(await saveSafetensors(source)).tensors].map(([k, e]) => [k, e.data]),
    );
  }
  const bytes = encodeSafetensors(toGPT2Tensors(params, config), { metadata: { format: "pt" } });
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(
    inFolder(dir, "config.json"),
    JSON.stringify(gpt2ConfigJson(config), null, 2) + "\n",
  );
  await Deno.writeFile(inFolder(dir, "model.safetensors"), bytes);
  if (options?.tokenizerFiles !== undefined) {
    await Deno.writeTextFile(inFolder(dir, "vocab.json"), options.tokenizerFiles.vocabJson);
    await Deno.writeTextFile(inFolder(dir, "merges.txt"), options.tokenizerFiles.mergesTxt);
  }
}
