/**
 * `cli.ts train`: trains the tiny character-level GPT on the shipped corpus
 * across pipeline ranks (one Deno worker per rank) with the chosen schedule,
 * printing the loss, measured bubble and makespan of every step, then the
 * sum and sum of squares of all parameters. `--ranks 1` is single-device
 * training through the same code path (one rank).
 *
 * The run is reproducible from `--seed S`: the weights come from
 * `createTinyGPT({ ..., seed: S })`, the batches from
 * `sampleBatch(tokens, batch, seqLen, new Rng(S + 1))`, one per step, and
 * the optimizer is AdamW (`--lr`, weight decay 0).
 *
 * `--comm mpi` runs one rank per process: start it with
 * `mpirun -n P deno run -A cli.ts train --comm mpi --ranks P …`. Every
 * process runs the same training; rank 0 alone prints the results (the
 * same lines as without MPI), and each rank prints its host, process and
 * device to stderr at start.
 *
 * @module
 */

import { CharTokenizer } from "../nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../nn/gpt.ts";
import { sampleBatch } from "../nn/sample_batch.ts";
import { CpuBackend } from "../tensor/cpu/backend.ts";
import { Rng } from "../tensor/random.ts";
import {
  PipelineParallelModel,
  type StepResult,
  type TrainingBatch,
} from "../pipeline/model/pipeline_parallel_model.ts";
import { MpiSetupError } from "../pipeline/comm/mpi_backend.ts";
import type { CliCommand, CliIo } from "./command.ts";
import { UsageError } from "./command.ts";
import { checkTrainMemory } from "./_train_memory.ts";
import {
  checkMpiLaunch,
  hostName,
  launchRank,
  type MpiLaunch,
  readTrainComm,
} from "./_mpi_launch.ts";
import {
  buildSchedule,
  HELP_LINE,
  integer,
  parseFlags,
  positiveInt,
  positiveNumber,
  readScheduleSpec,
  SCHEDULE_FLAGS,
  scheduleFlagsHelp,
} from "./_options.ts";

const FLAGS = {
  ...SCHEDULE_FLAGS,
  steps: { type: "string" },
  seed: { type: "string" },
  backend: { type: "string" },
  json: { type: "boolean" },
  batch: { type: "string" },
  "seq-len": { type: "string" },
  dim: { type: "string" },
  heads: { type: "string" },
  layers: { type: "string" },
  lr: { type: "string" },
  "in-process": { type: "boolean" },
  trace: { type: "string" },
} as const;

/** One line of `train --json` per step. */
export interface TrainStepJson {
  /** Step number, from 1. */
  readonly step: number;
  /** Full-batch cross-entropy loss of the step. */
  readonly loss: number;
  /** Measured bubble fraction of the step. */
  readonly bubble: number;
  /** Measured makespan of the step, ms. */
  readonly makespanMs: number;
}

/** The last line of `train --json`. */
export interface TrainParamsJson {
  /** Σ of all parameters (f64, in the model's parameter order). */
  readonly paramSum: number;
  /** Σ of their squares. */
  readonly paramSumSq: number;
}

const USAGE = `Usage: cli.ts train --schedule NAME --ranks P --microbatches M [options]
       mpirun -n P deno run -A cli.ts train --comm mpi --ranks P [options]

Trains the tiny character-level GPT on the shipped corpus across P pipeline
ranks (one Deno worker each, or one process each under mpirun) with the
given schedule, and prints the loss,
the measured bubble and makespan of every step, then the sum and sum of
squares of all parameters. --ranks 1 is single-device training (one rank).
Weights come from --seed S, batches from Rng(S + 1); AdamW, weight decay 0.

Options:
${scheduleFlagsHelp()}
  --steps K              training steps (default 3)
  --seed S               seed of the weights and the batches (integer, default 1)
  --backend KIND         cpu | webgpu | auto (default auto)
  --batch N              sequences per step (default max(8, M))
  --seq-len N            characters per sequence (default 16)
  --dim N                model width (default 16)
  --heads N              attention heads, dividing --dim (default 2)
  --layers N             Transformer blocks (default max(2, P·V − 3): enough for P·V chunks)
  --lr X                 AdamW learning rate (default 0.01)
  --comm KIND            where the ranks run: workers (default), in-process, or mpi (one
                         process per rank, started by mpirun -n P; rank 0 prints); a
                         number is the schedule generator's delay, as in schedule
  --in-process           run every rank in this thread (--comm in-process)
  --trace PATH           write the last steps' timeline (.svg, else Chrome trace JSON)
  --json                 one JSON line per step, then {"paramSum", "paramSumSq"}
${HELP_LINE}
`;

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

// Steps run back to back in groups (consecutive steps interlock inside a
// group); a group's lines are printed when it ends.
const GROUP = 10;

async function run(args: string[], io: CliIo): Promise<number> {
  const parsed = parseFlags("train", args, FLAGS);
  if (parsed.help) {
    io.out(USAGE);
    return 0;
  }
  const { comm, values } = readTrainComm(parsed);
  if (comm !== "mpi") return await train(values, comm, null, io);
  // Under mpirun every process checks the launch the same way: rank 0
  // alone reports a bad one, so that it reads as one line.
  const quiet = launchRank() !== 0;
  let launch: MpiLaunch;
  try {
    launch = checkMpiLaunch(readScheduleSpec(values).ranks);
  } catch (e) {
    if (quiet && e instanceof UsageError) return await quietExit();
    throw e;
  }
  try {
    return await train(values, comm, launch, launch.rank === 0 ? io : { ...io, out: () => {} });
  } catch (e) {
    if (e instanceof MpiSetupError) {
      if (launch.rank !== 0) return await quietExit();
      throw new UsageError(e.message);
    }
    if (e instanceof UsageError) {
      if (launch.rank !== 0) return await quietExit();
      throw e;
    }
    throw new Error(`rank ${launch.rank}: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  }
}

// A rank other than 0 that leaves a bad launch to rank 0's one line: it
// exits after rank 0 (mpirun ends the job when the first process fails, and
// may drop the output of the processes it ends), or is ended by mpirun.
async function quietExit(): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 5000));
  return 2;
}

async function train(
  values: Record<string, string | boolean | undefined>,
  comm: "workers" | "in-process" | "mpi",
  launch: MpiLaunch | null,
  io: CliIo,
): Promise<number> {
  const spec = readScheduleSpec(values);
  const steps = positiveInt(values, "steps", false) ?? 3;
  const seed = integer(values, "seed", 1);
  const backend = values.backend ?? "auto";
  if (backend !== "cpu" && backend !== "webgpu" && backend !== "auto") {
    throw new UsageError(`--backend must be cpu, webgpu or auto, got ${JSON.stringify(backend)}`);
  }
  const batch = positiveInt(values, "batch", false) ?? Math.max(8, spec.microBatches);
  const seqLen = positiveInt(values, "seq-len", false) ?? 16;
  const dim = positiveInt(values, "dim", false) ?? 16;
  const heads = positiveInt(values, "heads", false) ?? 2;
  const lr = positiveNumber(values, "lr", 0.01);
  if (dim % heads !== 0) {
    throw new UsageError(`--heads must divide --dim, got --heads ${heads} and --dim ${dim}`);
  }
  if (batch < spec.microBatches) {
    throw new UsageError(
      `--batch ${batch} is smaller than --microbatches ${spec.microBatches}: ` +
        "each micro-batch needs at least one sequence",
    );
  }
  const schedule = buildSchedule(spec);
  const chunks = schedule.stageToRank.length;
  const layers = positiveInt(values, "layers", false) ?? Math.max(2, chunks - 3);
  if (layers + 3 < chunks) {
    throw new UsageError(
      `--layers ${layers} gives ${layers + 3} layers (embedding, blocks, norm, head), ` +
        `fewer than the ${chunks} chunks of --ranks ${spec.ranks} × ${schedule.stagesPerRank}`,
    );
  }
  const trace = values.trace;
  if (trace !== undefined && String(trace) === "") throw new UsageError("--trace needs a path");

  const tok = CharTokenizer.fromText(TINY_CORPUS);
  checkTrainMemory({
    batch,
    seqLen,
    dim,
    heads,
    layers,
    vocab: tok.vocabSize,
    microBatches: spec.microBatches,
  });
  const tokens = tok.encode(TINY_CORPUS);
  const cpu = new CpuBackend();
  const net = createTinyGPT({ vocabSize: tok.vocabSize, seqLen, dim, heads, layers, seed }, cpu);
  const rng = new Rng(seed + 1);
  let model: PipelineParallelModel;
  try {
    model = await PipelineParallelModel.create({
      model: net,
      schedule,
      optimizer: { kind: "adamw", lr, weightDecay: 0 },
      loss: "cross-entropy",
      backend,
      rankGroup: comm,
    });
  } finally {
    net.dispose();
  }
  try {
    if (launch !== null) {
      // Every rank names its host, process and device (the WebGPU adapter it opened).
      const me = (await model.rankInfo())[launch.rank];
      io.err(
        `conveyor: rank ${launch.rank} of ${launch.size}: host ${hostName()}, pid ${Deno.pid}, ` +
          `local rank ${launch.localRank}, backend ${me.backend} (${me.device})\n`,
      );
    }
    if (!values.json) {
      const nParams = (await model.parameterStats()).count;
      io.out(
        `tiny GPT: ${layers} blocks, dim ${dim}, ${heads} heads, ${nParams} parameters, ` +
          `vocabulary ${tok.vocabSize}\n` +
          `pipeline: ${schedule.name}, ${schedule.ranks} rank${
            schedule.ranks === 1 ? "" : "s"
          } × ` +
          `${schedule.stagesPerRank} chunk${schedule.stagesPerRank === 1 ? "" : "s"}, ` +
          `${schedule.microBatches} micro-batches of a ${batch} × ${seqLen} batch, ` +
          `backend ${backend}, ${model.rankGroup === "mpi" ? "MPI processes" : model.rankGroup}\n` +
          `chunks (layers): ${
            model.partition.boundaries.slice(0, -1).map((b, s) =>
              `[${b}, ${model.partition.boundaries[s + 1]})`
            ).join(" ")
          }\n`,
      );
    }
    for (let done = 0; done < steps;) {
      const n = Math.min(GROUP, steps - done);
      const batches: TrainingBatch[] = Array.from({ length: n }, () => {
        const b = sampleBatch(tokens, batch, seqLen, rng);
        return { inputs: b.ids, shape: b.shape, targets: b.targets };
      });
      const r = await model.train(batches);
      r.steps.forEach((s: StepResult, i: number) => {
        const step = done + i + 1;
        if (values.json) {
          const line: TrainStepJson = {
            step,
            loss: s.loss,
            bubble: s.bubble,
            makespanMs: s.makespanMs,
          };
          io.out(JSON.stringify(line) + "\n");
        } else {
          io.out(
            `step ${step}/${steps}  loss ${s.loss.toFixed(4)}  bubble ${
              (100 * s.bubble).toFixed(1)
            }%  makespan ${s.makespanMs.toFixed(1)} ms  peak activations ${
              s.peakActivationBytes.map(kib).join(", ")
            }\n`,
          );
        }
      });
      done += n;
    }
    if (trace !== undefined) await model.writeTrace(String(trace));
    const stats = await model.parameterStats();
    if (values.json) {
      const last: TrainParamsJson = { paramSum: stats.sum, paramSumSq: stats.sumSq };
      io.out(JSON.stringify(last) + "\n");
    } else {
      io.out(`parameters: sum ${stats.sum}, sum of squares ${stats.sumSq}\n`);
      if (trace !== undefined) io.out(`timeline written to ${trace}\n`);
    }
  } finally {
    await model.dispose();
  }
  return 0;
}

/**
 * The `train` subcommand.
 *
 * @example
 * ```ts
 * import { trainCommand } from "@conveyor/core/cli";
 * let out = "";
 * const io = { out: (t: string) => void (out += t), err: () => {} };
 * await trainCommand.run(
 *   ["--schedule", "1f1b", "--ranks", "2", "--microbatches", "2", "--steps", "1",
 *    "--backend", "cpu", "--in-process", "--json"],
 *   io,
 * );
 * console.log(out.trim().split("\n").length); // 2: one step, then the parameter sums
 * ```
 */
export const trainCommand: CliCommand = {
  name: "train",
  summary: "train the tiny GPT across pipeline ranks: loss, bubble, makespan per step",
  usage: USAGE,
  run,
};
