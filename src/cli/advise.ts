/**
 * `cli.ts advise`: which schedule for this model? Measures the model (the
 * built-in tiny GPT with `train`'s model flags, or a user's model from
 * `--model PATH`) in P workers computing at once, predicts every
 * candidate's time per step and bytes per rank, and prints them ranked: a
 * Markdown table, or with `--json` one line per candidate, best first
 * ({@linkcode AdviceJson}). `--verify K` trains the best K for real and adds
 * `measuredMs`.
 *
 * A user's model module (`--model PATH`) exports, as its default export or
 * as `createAdviseModel`, a function that takes the backend to build on and
 * returns (or resolves to) a {@linkcode AdviseModule}: `{ model, sample,
 * loss, optimizer? }`. Every worker imports the module too (so that layers it
 * registers with `registerLayer` exist there): its top level should only
 * define and register, not build or train.
 *
 * @module
 */

import { CharTokenizer } from "../nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../nn/gpt.ts";
import { sampleBatch } from "../nn/sample_batch.ts";
import { Sequential } from "../nn/sequential.ts";
import type { OptimizerSpec } from "../nn/optimizer_spec.ts";
import { CpuBackend } from "../tensor/cpu/backend.ts";
import type { Backend } from "../tensor/mod.ts";
import { Rng } from "../tensor/random.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../pipeline/schedule/generate.ts";
import { type Advice, type AdviseModule, adviseSchedule } from "../advise/advise.ts";
import type { AdviceCalibration } from "../advise/calibration.ts";
import type { TrainingBatch } from "../pipeline/model/batch.ts";
import type { PipelineLoss } from "../pipeline/model/model_rank_executor.ts";
import {
  type AdviceJson,
  adviceJson,
  formatAdviceTable,
  formatBytes,
} from "../advise/advice_table.ts";
import { summary } from "../pipeline/partition/summary.ts";
import { passTiming } from "../pipeline/partition/layer_passes.ts";
import { type CliCommand, type CliIo, UsageError } from "./command.ts";
import { checkTrainMemory } from "./_train_memory.ts";
import {
  flagCommand,
  type FlagValues,
  HELP_LINE,
  integer,
  positiveInt,
  readBytesFlag,
} from "./_options.ts";
import { GPT_FLAGS, readGptFlags } from "./_gpt_flags.ts";

export type { AdviceJson } from "../advise/advice_table.ts";

const FLAGS = {
  schedule: { type: "string" },
  ranks: { type: "string" },
  microbatches: { type: "string" },
  model: { type: "string" },
  backend: { type: "string" },
  ...GPT_FLAGS,
  "rank-memory": { type: "string" },
  "shard-optimizer": { type: "string" },
  repeats: { type: "string" },
  warmup: { type: "string" },
  alone: { type: "boolean" },
  "no-calibrate": { type: "boolean" },
  verify: { type: "string" },
  "verify-steps": { type: "string" },
  json: { type: "boolean" },
  summary: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

const USAGE = `Usage: cli.ts advise [--ranks P[,P…]] [--microbatches M[,M…]] [options]
       cli.ts advise --model PATH [options]

Which schedule for this model? Measures every layer's forward (F), input
gradient (I) and weight gradient (W), the loss and the optimizer step, in P
workers computing at once (as P ranks will), each stage's activation bytes,
and the runtime's hand-over and per-action costs; predicts each candidate's
time per training step (steady state) and peak bytes per rank; prints them
ranked, those within --rank-memory first, fastest first. The model is the
tiny GPT of \`train\` (same flags, same defaults) or --model's.

Options:
  --schedule NAME[,…]    schedules to consider (default all: ${SCHEDULE_NAMES.join(", ")})
  --ranks P[,…]          rank counts to consider (default 1,2: one rank shows whether
                         pipelining pays for this model)
  --microbatches M[,…]   micro-batch counts to consider (default 8)
  --backend KIND         cpu | webgpu | auto (default cpu)
  --model PATH           a module whose default export (or createAdviseModel) takes
                         the backend and returns { model, sample, loss, optimizer? }
  --batch N              tiny GPT: sequences per step (default max(8, largest M))
  --seq-len N            tiny GPT: characters per sequence (default 16)
  --dim N                tiny GPT: model width (default 16)
  --heads N              tiny GPT: attention heads, dividing --dim (default 2)
  --layers N             tiny GPT: blocks (default max(2, stages − 3), as train)
  --seed S               tiny GPT: seed of the weights and the batch (default 1)
  --rank-memory BYTES    memory one rank may hold (e.g. 512MiB, 2GiB); over it ranks last
  --shard-optimizer D    ZeRO-1: count 1/D of the optimizer state per rank (D replicas share it)
  --repeats N            timed profiling sweeps (default 5)
  --warmup N             untimed sweeps first (default 1)
  --alone                profile one copy alone instead of P at once
  --no-calibrate         predict from the profile only; by default short real runs
                         (1F1B, ZB-H1: 3 warm-up + 3 steps) scale each action kind's
                         profiled time by its measured ratio and fit the runtime's costs
  --verify K             train the best K for real: adds measured ms (and the ratio)
  --verify-steps N       measured steps per verification, after 2 warm-up (default 8)
  --summary              after the table, the best candidate's model summary per stage
                         (layers, output shapes, parameters and bytes per stage)
  --json                 one JSON line per candidate, best first:
                         {"schedule","ranks","microBatches","stagesPerRank","boundaries",
                         "predictedMs","bubble","peakBytes","memory","fits"}, "spreadMs"
                         (± what the calibration runs varied), "tied" (true where it
                         cannot be told from the first), "sameRunAs" (schedules making
                         the same run, folded into it) and with
                         --verify "measuredMs","measuredBubble","measuredActivationBytes";
                         calibrated: "uncalibratedMs" and "calibration" {"factors",
                         "actionMs","handOverMs","stepMs"}
${HELP_LINE}
`;

function intList(values: FlagValues, flag: string, fallback: number[]): number[] {
  const v = values[flag];
  if (v === undefined) return fallback;
  const parts = String(v).split(",").map((s) => s.trim());
  const out = parts.map((s) => {
    const n = Number(s);
    if (!/^\+?\d+$/.test(s) || !Number.isSafeInteger(n) || n < 1) {
      throw new UsageError(
        `--${flag} must be a positive integer or a comma-separated list of them, got ${
          JSON.stringify(v)
        }`,
      );
    }
    return n;
  });
  return [...new Set(out)];
}

/** Bytes from `--rank-memory`: a number with an optional unit (B, KiB, MiB, GiB, KB, MB, GB). */
function readBytes(values: FlagValues): number | undefined {
  return readBytesFlag(values, "rank-memory");
}

interface Subject {
  readonly model: Sequential;
  readonly sample: TrainingBatch;
  readonly loss: PipelineLoss;
  readonly optimizer?: OptimizerSpec;
  readonly modules: string[];
  readonly title: string;
}

// The built-in tiny GPT, with train's flags and defaults.
function tinyGpt(values: FlagValues, schedules: string[], ranks: number[], ms: number[]): Subject {
  const gpt = readGptFlags(values, Math.max(8, ...ms), Math.max(...ms));
  const { batch, seqLen, dim, heads, seed } = gpt;
  // Enough layers for the most stages any candidate cuts the model into.
  let stages = 1;
  for (const name of schedules) {
    for (const p of ranks) {
      try {
        stages = Math.max(
          stages,
          generateSchedule(name, { ranks: p, microBatches: ms[0] }).stageToRank.length,
        );
      } catch {
        // a combination the schedule refuses is reported with the advice
      }
    }
  }
  const layers = gpt.layersFor(stages);
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  checkTrainMemory({
    batch,
    seqLen,
    dim,
    heads,
    layers,
    vocab: tok.vocabSize,
    microBatches: Math.max(...ms),
  });
  const model = createTinyGPT(
    { vocabSize: tok.vocabSize, seqLen, dim, heads, layers, seed },
    new CpuBackend(),
  );
  const b = sampleBatch(tok.encode(TINY_CORPUS), batch, seqLen, new Rng(seed + 1));
  return {
    model,
    sample: { inputs: b.ids, shape: b.shape, targets: b.targets },
    loss: "cross-entropy",
    modules: [],
    title: `tiny GPT: ${layers} block${
      layers === 1 ? "" : "s"
    }, dim ${dim}, ${heads} heads, a ${batch} × ${seqLen} batch`,
  };
}

// A user's model from its module (see the module documentation).
async function userModel(path: string): Promise<Subject> {
  if (path === "") throw new UsageError("--model needs a path");
  let url: URL;
  try {
    url = /^[a-z][a-z0-9+.-]*:/i.test(path) && !/^[a-z]:\\/i.test(path)
      ? new URL(path)
      : new URL(path, `file://${Deno.cwd()}/`);
  } catch {
    throw new UsageError(`--model ${path}: not a path or URL`);
  }
  let mod: Record<string, unknown>;
  try {
    mod = await import(url.href);
  } catch (e) {
    throw new UsageError(`--model ${path}: cannot import it: ${(e as Error).message}`);
  }
  const make = mod.default ?? mod.createAdviseModel;
  if (typeof make !== "function") {
    throw new UsageError(
      `--model ${path} must export a function (default or createAdviseModel) returning ` +
        "{ model, sample, loss, optimizer? }",
    );
  }
  const backend: Backend = new CpuBackend();
  const got = await (make as (b: Backend) => unknown)(backend) as Partial<AdviseModule> | null;
  if (got === null || typeof got !== "object" || !(got.model instanceof Sequential)) {
    throw new UsageError(
      `--model ${path}: its function must return { model: Sequential, sample, loss }, got ${
        got === null || typeof got !== "object" ? String(got) : `model ${typeof got.model}`
      }`,
    );
  }
  return {
    model: got.model,
    sample: got.sample as TrainingBatch,
    loss: got.loss as PipelineLoss,
    ...(got.optimizer === undefined ? {} : { optimizer: got.optimizer }),
    modules: [url.href],
    title: `${path}: ${got.model.layers.length} layers`,
  };
}

function calibrationLine(c: AdviceCalibration): string {
  const kinds = (["F", "I", "W", "B"] as const).flatMap((k) => {
    const f = c.kinds[k];
    return f === undefined
      ? []
      : [`${k} ×${f.factor.toFixed(2)} (spread ${(100 * f.spread).toFixed(0)}%, ${f.samples})`];
  });
  const o = c.overheads;
  const runs = c.runs.map((r) =>
    `${r.schedule} measured ${r.measuredMs.toFixed(1)} ms, predicted ${
      r.predictedMs.toFixed(1)
    } (profile only ${r.uncalibratedMs.toFixed(1)})`
  );
  return `calibration at P = ${c.ranks}, m = ${c.microBatches} (real runs, ${
    (c.elapsedMs / 1000).toFixed(1)
  } s): measured / profiled ${kinds.join(", ")}; runtime ${
    (1000 * o.actionMs).toFixed(0)
  } µs per action, hand-over ${(1000 * o.handOverMs).toFixed(0)} µs, ${
    (o.stepMs ?? 0).toFixed(1)
  } ms per step; ${runs.join("; ")}`;
}

function header(advice: Advice, title: string, backend: string): string {
  const lines = [`${title}; backend ${backend}`];
  for (const p of advice.profiles) {
    const pr = p.profile;
    lines.push(
      `profile at P = ${p.ranks} (${
        p.concurrency === 1 ? "one copy alone" : `${p.concurrency} copies computing at once`
      }), ${pr.rows}-row micro-batches: ` +
        `F + I + W through the model ${
          passTiming(pr.totals).median.toFixed(1)
        } ms per micro-batch (median of ${pr.totals.length} sweeps, interquartile spread ${
          (100 * pr.spread).toFixed(0)
        }%); ` +
        `hand-over ${(1000 * p.overheads.handOverMs).toFixed(0)} µs, ` +
        `runtime ${(1000 * p.overheads.actionMs).toFixed(0)} µs per action`,
    );
  }
  for (const c of advice.calibrations) lines.push(calibrationLine(c));
  lines.push(`advice in ${(advice.elapsedMs / 1000).toFixed(1)} s`);
  return lines.join("\n");
}

async function run(values: FlagValues, io: CliIo): Promise<number> {
  const schedules = values.schedule === undefined
    ? [...SCHEDULE_NAMES]
    : [...new Set(String(values.schedule).split(",").map((s) => s.trim()))];
  for (const s of schedules) {
    if (!(SCHEDULE_NAMES as readonly string[]).includes(s)) {
      throw new UsageError(
        `--schedule must be names from ${SCHEDULE_NAMES.join(", ")}, got ${JSON.stringify(s)}`,
      );
    }
  }
  const ranks = intList(values, "ranks", [1, 2]);
  const ms = intList(values, "microbatches", [8]);
  const backend = values.backend ?? "cpu";
  if (backend !== "cpu" && backend !== "webgpu" && backend !== "auto") {
    throw new UsageError(`--backend must be cpu, webgpu or auto, got ${JSON.stringify(backend)}`);
  }
  const memoryLimit = readBytes(values);
  const repeats = positiveInt(values, "repeats", false) ?? 5;
  const warmup = values.warmup === undefined ? 1 : integer(values, "warmup", 1);
  if (warmup < 0) throw new UsageError(`--warmup must be an integer >= 0, got ${warmup}`);
  const verify = values.verify === undefined ? 0 : integer(values, "verify", 0);
  if (verify < 0) throw new UsageError(`--verify must be an integer >= 0, got ${verify}`);
  const verifySteps = positiveInt(values, "verify-steps", false) ?? 8;
  if (verifySteps < 2) {
    throw new UsageError(`--verify-steps must be at least 2, got ${verifySteps}`);
  }
  if (values.model !== undefined) {
    const given = Object.keys(GPT_FLAGS).filter((f) => values[f] !== undefined);
    if (given.length > 0) {
      throw new UsageError(
        `--${given[0]} describes the built-in tiny GPT; it does not apply with --model`,
      );
    }
  }
  const subject = values.model === undefined
    ? tinyGpt(values, schedules, ranks, ms)
    : await userModel(String(values.model));
  let advice: Advice;
  let best = "";
  try {
    advice = await adviseSchedule(subject.model, subject.sample, {
      loss: subject.loss,
      ...(subject.optimizer === undefined ? {} : { optimizer: subject.optimizer }),
      schedules,
      ranks,
      microBatches: ms,
      backend,
      ...(memoryLimit === undefined ? {} : { memoryLimit }),
      shardOptimizer: positiveInt(values, "shard-optimizer", false) ?? 1,
      repeats,
      warmup,
      concurrent: values.alone !== true,
      calibrate: values["no-calibrate"] !== true,
      verify,
      verifySteps,
      modules: subject.modules,
      onProgress: (m) => io.err(`advise: ${m}\n`),
    });
    const top = advice.candidates[0];
    if (values.summary && top !== undefined) {
      best = `\n${top.schedule} at P = ${top.ranks}, m = ${top.microBatches}:\n` +
        summary(subject.model, {
          inputShape: [...subject.sample.shape],
          boundaries: top.boundaries,
          ...(top.generated === undefined ? {} : { stageToRank: top.generated.stageToRank }),
          optimizer: subject.optimizer ?? { kind: "adamw", lr: 1e-3, weightDecay: 0 },
        }).text + "\n";
    }
  } catch (e) {
    // A model or sample the advisor refuses is a bad --model (or flag) value.
    if (e instanceof RangeError || e instanceof TypeError) throw new UsageError(e.message);
    throw e;
  } finally {
    subject.model.dispose();
  }
  if (values.json) {
    for (const c of advice.candidates) {
      const line: AdviceJson = adviceJson(c);
      io.out(JSON.stringify(line) + "\n");
    }
    return 0;
  }
  io.out(header(advice, subject.title, backend) + "\n\n");
  io.out(formatAdviceTable(advice.candidates) + "\n");
  if (advice.verdict !== undefined) io.out(`\n${advice.verdict}\n`);
  if (advice.candidates.some((c) => c.tied === true)) {
    io.out(
      "\n≈: cannot be told apart from #1: the predictions differ by less than their spreads " +
        "(±, how much the calibration runs' own steps varied)\n",
    );
  }
  if (memoryLimit !== undefined) {
    io.out(`\nmemory limit per rank: ${formatBytes(memoryLimit)}\n`);
  }
  for (const s of advice.skipped) {
    io.out(`\nnot possible: ${s.schedule} at P = ${s.ranks}, m = ${s.microBatches}: ${s.reason}`);
  }
  if (advice.skipped.length > 0) io.out("\n");
  io.out(best);
  return 0;
}

/**
 * The `advise` subcommand.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { adviseCommand } from "@conveyor/core/cli";
 * let out = "";
 * const io = { out: (t: string) => void (out += t), err: () => {} };
 * const code = await adviseCommand.run(
 *   ["--schedule", "1f1b,zb-h1", "--ranks", "2", "--microbatches", "2", "--repeats", "1", "--json"],
 *   io,
 * );
 * assert.equal(code, 0);
 * const lines = out.trim().split("\n").map((l) => JSON.parse(l));
 * assert.equal(lines.length, 2);
 * assert.ok(lines[0].predictedMs <= lines[1].predictedMs && lines[0].peakBytes.length === 2);
 * ```
 */
export const adviseCommand: CliCommand = flagCommand(
  {
    name: "advise",
    summary: "which schedule for this model: predicted ms per step and bytes per rank, ranked",
    usage: USAGE,
  },
  FLAGS,
  run,
);
