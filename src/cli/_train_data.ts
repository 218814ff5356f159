// What `cli.ts train` trains on and what it trains: the built-in tiny GPT
// on the shipped corpus or on `--text FILE` (characters as tokens), or a
// GPT-2-format folder (`--model DIR`, its BPE tokenizer) on `--text FILE`;
// `--tie-embeddings` for the built-in one, `--save-model OUT` writing a
// GPT-2 folder. Everything is read and checked before any rank starts. Not
// exported from the package.

import { CharTokenizer } from "../nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../nn/gpt.ts";
import { type GPT2Config, loadGPT2, saveGPT2 } from "../nn/gpt2.ts";
import type { Sequential } from "../nn/sequential.ts";
import type { Backend } from "../tensor/mod.ts";
import { checkOutputPath } from "../pipeline/model/output_path.ts";
import { UsageError } from "./command.ts";

/** The flags this file reads. */
export const DATA_FLAGS = {
  model: { type: "string" },
  text: { type: "string" },
  "save-model": { type: "string" },
  "tie-embeddings": { type: "boolean" },
} as const;

/** The help lines of {@linkcode DATA_FLAGS}. */
export const DATA_HELP =
  `  --text FILE            train on this UTF-8 text file (default: the shipped corpus)
  --model DIR            fine-tune a GPT-2-format folder (config.json, model.safetensors,
                         vocab.json + merges.txt) on --text FILE; its sizes replace
                         --dim --heads --layers
  --tie-embeddings       the built-in GPT's head shares the token embedding's table
  --save-model OUT       write the trained model as a GPT-2-format folder OUT (with
                         --model, or the built-in GPT with --tie-embeddings)`;

/** The model and its tokens. */
export interface TrainData {
  /** The token ids of the text. */
  readonly tokens: number[];
  /** The model's vocabulary. */
  readonly vocabSize: number;
  /** Width, heads and blocks of the model (the flags', or the folder's). */
  readonly dim: number;
  /** See `dim`. */
  readonly heads: number;
  /** See `dim`. */
  readonly layers: number;
  /** Where the text came from, for the lines printed. */
  readonly label: string;
  /** The model on the backend given to `readTrainData` (the caller disposes it). */
  net(): Sequential;
  /** Writes `--save-model` from the trained model's safetensors bytes (no-op without it). */
  save(bytes: () => Promise<Uint8Array>): Promise<string | null>;
}

async function readText(path: string): Promise<string> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    throw new UsageError(`--text: cannot read ${path}: ${(e as Error).message}`);
  }
  if (text.length === 0) throw new UsageError(`--text ${path} is empty`);
  return text;
}

/**
 * Reads `--model`, `--text`, `--tie-embeddings` and `--save-model`;
 * `shape` holds the built-in GPT's flags (`layers` undefined where the
 * default is wanted) and `seqLen`, which the text must exceed.
 */
export async function readTrainData(
  values: Record<string, unknown>,
  shape: { seqLen: number; dim: number; heads: number; layers: number | undefined; seed: number },
  backend: Backend,
): Promise<TrainData> {
  const modelDir = values.model === undefined ? undefined : String(values.model);
  const textPath = values.text === undefined ? undefined : String(values.text);
  const tie = values["tie-embeddings"] === true;
  const out = values["save-model"] === undefined ? undefined : String(values["save-model"]);
  if (out !== undefined) {
    if (out === "") throw new UsageError("--save-model needs a folder path");
    if (modelDir === undefined && !tie) {
      throw new UsageError(
        "--save-model writes a GPT-2-format folder: it needs --model DIR or --tie-embeddings",
      );
    }
    const parent = out.includes("/") ? out.slice(0, out.lastIndexOf("/")) || "/" : ".";
    try {
      checkOutputPath(`${parent}/.conveyor-probe`, "--save-model", { write: "direct" });
    } catch (e) {
      if (e instanceof TypeError) throw new UsageError(e.message);
      throw e;
    }
  }
  const text = textPath === undefined ? null : await readText(textPath);
  if (modelDir === undefined) {
    const source = text ?? TINY_CORPUS;
    const tok = CharTokenizer.fromText(source);
    const tokens = tok.encode(source);
    checkLength(tokens.length, shape.seqLen, textPath ?? "the shipped corpus");
    const layers = shape.layers ?? 2;
    const cfg = {
      vocabSize: tok.vocabSize,
      seqLen: shape.seqLen,
      dim: shape.dim,
      heads: shape.heads,
      layers,
      seed: shape.seed,
      tieEmbeddings: tie,
    };
    const gpt2: GPT2Config = {
      vocabSize: tok.vocabSize,
      nPositions: shape.seqLen,
      nEmbd: shape.dim,
      nHead: shape.heads,
      nLayer: layers,
      nInner: 4 * shape.dim,
      layerNormEpsilon: 1e-5,
    };
    return {
      tokens,
      vocabSize: tok.vocabSize,
      dim: shape.dim,
      heads: shape.heads,
      layers,
      label: textPath ?? "the shipped corpus",
      net: () => createTinyGPT(cfg, backend),
      save: async (bytes) => {
        if (out === undefined) return null;
        await saveGPT2(out, await bytes(), { config: gpt2 });
        return out;
      },
    };
  }
  for (const flag of ["dim", "heads", "layers", "tie-embeddings"]) {
    if (values[flag] !== undefined) {
      throw new UsageError(`--${flag} is the built-in GPT's; --model ${modelDir} has its own`);
    }
  }
  if (text === null || textPath === undefined) {
    throw new UsageError(`--model ${modelDir} needs --text FILE to train on`);
  }
  let loaded;
  try {
    loaded = await loadGPT2(modelDir, backend);
  } catch (e) {
    throw new UsageError(`--model ${modelDir}: ${(e as Error).message}`);
  }
  const { model, config, tokenizer } = loaded;
  if (tokenizer === null) {
    model.dispose();
    throw new UsageError(`--model ${modelDir} has no vocab.json + merges.txt to read --text with`);
  }
  if (shape.seqLen > config.nPositions) {
    model.dispose();
    throw new UsageError(
      `--seq-len ${shape.seqLen} is past the model's context (n_positions ${config.nPositions})`,
    );
  }
  const tokens = tokenizer.encode(text);
  try {
    checkLength(tokens.length, shape.seqLen, textPath);
  } catch (e) {
    model.dispose();
    throw e;
  }
  const [vocabJson, mergesTxt] = await Promise.all([
    Deno.readTextFile(`${modelDir}/vocab.json`),
    Deno.readTextFile(`${modelDir}/merges.txt`),
  ]);
  return {
    tokens,
    vocabSize: config.vocabSize,
    dim: config.nEmbd,
    heads: config.nHead,
    layers: config.nLayer,
    label: textPath,
    net: () => model,
    save: async (bytes) => {
      if (out === undefined) return null;
      await saveGPT2(out, await bytes(), { config, tokenizerFiles: { vocabJson, mergesTxt } });
      return out;
    },
  };
}

function checkLength(n: number, seqLen: number, what: string): void {
  if (n <= seqLen) {
    throw new UsageError(
      `${what} has ${n} tokens; training on sequences of --seq-len ${seqLen} needs more than ${seqLen}`,
    );
  }
}
