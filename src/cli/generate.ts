/**
 * `cli.ts generate`: text from a GPT-2-format folder, on one device or
 * through a pipeline of ranks, with a key/value cache (or `--no-cache`).
 *
 * @module
 */

import { CpuBackend } from "../tensor/cpu/backend.ts";
import { createBackend } from "../tensor/create_backend.ts";
import { loadGPT2 } from "../nn/gpt2.ts";
import { generate, type GenerationResult } from "../nn/generate.ts";
import { generateSchedule, SCHEDULE_REGISTRY } from "../pipeline/schedule/generate.ts";
import { PipelineParallelModel } from "../pipeline/model/pipeline_parallel_model.ts";
import type { CliCommand, CliIo } from "./command.ts";
import { UsageError } from "./command.ts";
import { flagCommand, type FlagValues, HELP_LINE, integer, positiveInt } from "./_options.ts";

/** The last line of `generate --json`: a contract. */
export interface GenerateJson {
  /** The generated token ids only (not the prompt's). */
  readonly ids: number[];
  /** Their text, when the folder has a tokenizer. */
  readonly text?: string;
  /** Generated tokens per second of the whole generation (prompt included). */
  readonly tokensPerSecond: number;
}

const FLAGS = {
  model: { type: "string" },
  prompt: { type: "string" },
  "prompt-ids": { type: "string" },
  "max-tokens": { type: "string" },
  temperature: { type: "string" },
  "top-k": { type: "string" },
  "top-p": { type: "string" },
  seed: { type: "string" },
  ranks: { type: "string" },
  schedule: { type: "string" },
  microbatches: { type: "string" },
  "no-cache": { type: "boolean" },
  backend: { type: "string" },
  "in-process": { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

const USAGE =
  `Usage: cli.ts generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) --max-tokens N [options]

Generates N tokens after the prompt with a GPT-2-format model (a folder with
config.json, model.safetensors and, for --prompt, vocab.json + merges.txt),
on one device, or through a pipeline of --ranks P (each rank keeping its
stages' key/value caches). Prints the prompt and the generated text (or ids),
then the tokens per second.

Options:
  --model DIR            the GPT-2-format folder (required)
  --prompt TEXT          the prompt, encoded by the folder's tokenizer
  --prompt-ids LIST      the prompt as token ids, comma-separated (e.g. 464,2068)
  --max-tokens N         tokens to generate (required)
  --temperature T        softmax temperature, 0 = greedy (default 1)
  --top-k K              sample among the K most likely tokens (default all)
  --top-p P              sample among the most likely tokens reaching probability P
  --seed S               seed of the sampling (integer, default 0)
  --ranks P              pipeline ranks (default 1: this thread, no pipeline)
  --schedule NAME        the pipeline's schedule, as train takes it (default 1f1b)
  --microbatches M       the schedule's micro-batches (default 2·P)
  --no-cache             recompute the whole sequence for every token
  --backend KIND         cpu | webgpu | auto (default cpu)
  --in-process           run every rank in this thread
  --json                 last line {"ids": [generated ids], "text": "…" (with a
                         tokenizer), "tokensPerSecond": x}
${HELP_LINE}
`;

function readPromptIds(raw: string): number[] {
  const parts = raw.split(",").map((p) => p.trim());
  const ids = parts.map(Number);
  const bad = parts.findIndex((p, i) => !/^\d+$/.test(p) || !Number.isSafeInteger(ids[i]));
  if (raw.trim() === "" || bad >= 0) {
    throw new UsageError(
      `--prompt-ids must be token ids separated by commas (e.g. 464,2068), got ${
        JSON.stringify(raw)
      }`,
    );
  }
  return ids;
}

function readNumber(values: FlagValues, flag: string, ok: (v: number) => boolean, rule: string) {
  if (values[flag] === undefined) return undefined;
  const v = Number(String(values[flag]).trim());
  if (String(values[flag]).trim() === "" || !Number.isFinite(v) || !ok(v)) {
    throw new UsageError(`--${flag} must be ${rule}, got ${JSON.stringify(values[flag])}`);
  }
  return v;
}

async function run(values: FlagValues, io: CliIo): Promise<number> {
  if (values.model === undefined || String(values.model) === "") {
    throw new UsageError("generate needs --model DIR (a GPT-2-format folder)");
  }
  const dir = String(values.model);
  if ((values.prompt === undefined) === (values["prompt-ids"] === undefined)) {
    throw new UsageError("give the prompt as --prompt TEXT or --prompt-ids 1,2,3 (one of them)");
  }
  const maxTokens = positiveInt(values, "max-tokens", true)!;
  const temperature = readNumber(values, "temperature", (v) => v >= 0, "a number >= 0");
  const topK = positiveInt(values, "top-k", false);
  const topP = readNumber(values, "top-p", (v) => v > 0 && v <= 1, "in (0, 1]");
  const seed = integer(values, "seed", 0);
  const ranks = positiveInt(values, "ranks", false) ?? 1;
  const backend = String(values.backend ?? "cpu");
  if (backend !== "cpu" && backend !== "webgpu" && backend !== "auto") {
    throw new UsageError(`--backend must be cpu, webgpu or auto, got ${JSON.stringify(backend)}`);
  }
  for (const flag of ["schedule", "microbatches", "in-process"]) {
    if (values[flag] !== undefined && ranks === 1 && values.ranks === undefined) {
      throw new UsageError(`--${flag} applies to a pipeline: give --ranks P too`);
    }
  }
  const scheduleName = String(values.schedule ?? "1f1b");
  if (!SCHEDULE_REGISTRY.definitions.some((d) => d.name === scheduleName)) {
    throw new UsageError(
      `--schedule must be one of ${
        SCHEDULE_REGISTRY.definitions.map((d) => d.name).join(", ")
      }, got ${JSON.stringify(scheduleName)}`,
    );
  }
  const microBatches = positiveInt(values, "microbatches", false) ?? 2 * ranks;
  // One device runs on --backend; a pipeline's ranks make their own (this copy only feeds them).
  const be = ranks === 1 ? await createBackend(backend) : new CpuBackend();
  let loaded;
  try {
    loaded = await loadGPT2(dir, be);
  } catch (e) {
    await be.close();
    throw new UsageError(`--model ${dir}: ${(e as Error).message}`);
  }
  const { model: net, tokenizer } = loaded;
  let result: GenerationResult;
  let prompt: number[];
  try {
    if (values.prompt !== undefined) {
      if (tokenizer === null) {
        throw new UsageError(
          `--prompt needs the folder's vocab.json + merges.txt; ${dir} has none (use --prompt-ids)`,
        );
      }
      prompt = tokenizer.encode(String(values.prompt));
      if (prompt.length === 0) throw new UsageError("--prompt is empty");
    } else prompt = readPromptIds(String(values["prompt-ids"]));
    const options = {
      maxTokens,
      cache: values["no-cache"] !== true,
      seed,
      ...(temperature === undefined ? {} : { temperature }),
      ...(topK === undefined ? {} : { topK }),
      ...(topP === undefined ? {} : { topP }),
    };
    try {
      if (ranks === 1) result = await generate(net, prompt, options);
      else {
        const schedule = generateSchedule(scheduleName, { ranks, microBatches });
        await using model = await PipelineParallelModel.create({
          model: net,
          schedule,
          loss: "cross-entropy",
          optimizer: { kind: "sgd", lr: 0 },
          backend,
          rankGroup: values["in-process"] === true ? "in-process" : "workers",
        });
        result = await model.generate(prompt, options);
      }
    } catch (e) {
      // A prompt or option the model refuses is the command line's to fix.
      if (e instanceof RangeError || e instanceof TypeError) throw new UsageError(e.message);
      throw e;
    }
  } finally {
    net.dispose();
    await be.close();
  }
  const ids = result.ids[0];
  const text = tokenizer?.decode(ids);
  if (values.json) {
    const line: GenerateJson = {
      ids,
      ...(text === undefined ? {} : { text }),
      tokensPerSecond: result.tokensPerSecond,
    };
    io.out(JSON.stringify(line) + "\n");
  } else {
    io.out(
      text === undefined
        ? `prompt ids: ${prompt.join(",")}\ngenerated ids: ${ids.join(",")}\n`
        : `${tokenizer!.decode(prompt)}${text}\n`,
    );
    io.out(
      `${result.tokens} tokens in ${result.seconds.toFixed(2)} s (${
        result.tokensPerSecond.toFixed(1)
      } tokens/s, ${ranks === 1 ? "one device" : `${ranks} ranks, ${scheduleName}`}, ${
        values["no-cache"] === true ? "no cache" : "KV cache"
      })\n`,
    );
  }
  return 0;
}

/**
 * The `generate` subcommand.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { generateCommand } from "@conveyor/core/cli";
 * import { saveGPT2 } from "@conveyor/core/format";
 * const dir = await Deno.makeTempDir();
 * const gpt = createTinyGPT({ vocabSize: 12, seqLen: 16, dim: 8, heads: 2, layers: 1, tieEmbeddings: true }, new CpuBackend());
 * await saveGPT2(dir, gpt);
 * let out = "";
 * const io = { out: (t: string) => void (out += t), err: () => {} };
 * await generateCommand.run(["--model", dir, "--prompt-ids", "1,2", "--max-tokens", "3", "--json"], io);
 * const last = JSON.parse(out.trim().split("\n").at(-1)!);
 * assert.equal(last.ids.length, 3);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export const generateCommand: CliCommand = flagCommand(
  {
    name: "generate",
    summary: "generate text from a GPT-2-format model, on one device or through a pipeline",
    usage: USAGE,
  },
  FLAGS,
  run,
);
