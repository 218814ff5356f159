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
 * the optimizer is AdamW (`--lr`, weight decay 0) with the learning-rate
 * schedule of `--lr-schedule`.
 *
 * `--save-checkpoint PATH` writes a training checkpoint at the end (weights,
 * AdamW's moments, the step count and the batch `Rng`'s state);
 * `--resume PATH` starts from one: its step numbers continue (the first
 * line is step N + 1), the batches continue the stored `Rng`, and N steps,
 * a checkpoint and M resumed steps print the same losses and parameter
 * sums as N + M steps in one run (same flags, `--decay-steps` given).
 *
 * `--comm mpi` runs one rank per process: start it with
 * `mpirun -n P deno run -A cli.ts train --comm mpi --ranks P …`. Every
 * process runs the same training; rank 0 alone prints the results (the
 * same lines as without MPI), and each rank prints its host, process and
 * device to stderr at start.
 *
 * @module
 */

import { sampleBatch } from "../nn/sample_batch.ts";
import { CpuBackend } from "../tensor/cpu/backend.ts";
import { Rng, type RngState } from "../tensor/random.ts";
import { createOptimizer, type OptimizerSpec } from "../nn/optimizer_spec.ts";
import {
  PipelineParallelModel,
  type StepResult,
  type TrainingBatch,
} from "../pipeline/model/pipeline_parallel_model.ts";
import type { TrainParamsJson, TrainStepJson } from "./_train_json.ts";
import type { TrainCallback } from "../pipeline/model/train_callback.ts";
import { readOutputs, readTraceStep } from "./_train_outputs.ts";
import { MetricsLogger } from "../pipeline/model/callbacks/metrics_logger.ts";
import { CurveWriter } from "../pipeline/model/callbacks/curve_writer.ts";
import { parseTrainingCheckpoint } from "../nn/training_checkpoint.ts";
import { MpiSetupError } from "../pipeline/comm/mpi_backend.ts";
import type { CliCommand, CliIo } from "./command.ts";
import { UsageError } from "./command.ts";
import { checkTrainMemory } from "./_train_memory.ts";
import { GPT_FLAGS, readGptFlags } from "./_gpt_flags.ts";
import {
  checkMpiLaunch,
  hostName,
  launchRank,
  type MpiLaunch,
  readTrainComm,
} from "./_mpi_launch.ts";
import {
  buildSchedule,
  COST_FLAGS,
  flagCommand,
  type FlagValues,
  HELP_LINE,
  positiveInt,
  positiveNumber,
  readScheduleSpec,
  type ScheduleSpec,
  SHAPE_FLAGS,
  shapeFlagsHelp,
} from "./_options.ts";
import { SCHEDULE_REGISTRY } from "../pipeline/schedule/generate.ts";
import { readLrSchedule } from "./_lr_flags.ts";
import { DATA_FLAGS, DATA_HELP, readTrainData } from "./_train_data.ts";

// A Ctrl-C during training: the first aborts `signal` (train ends the window
// running, and the command writes its outputs as at the end), a second ends
// the process at once (exit 130).
/** A Ctrl-C listener held until disposed (once; later disposals do nothing). */
interface Interrupt extends Disposable {
  /** Aborted by the first Ctrl-C. */
  readonly signal: AbortSignal;
}

/**
 * Listens for SIGINT while held, when `enabled` (not under MPI: every
 * process gets the signal, and the ranks must stop at one step).
 */
function listenForInterrupt(enabled: boolean): Interrupt {
  const stop = new AbortController();
  const interrupt = () => stop.signal.aborted ? Deno.exit(130) : stop.abort();
  let held = enabled;
  if (held) Deno.addSignalListener("SIGINT", interrupt);
  return {
    signal: stop.signal,
    [Symbol.dispose]: () => {
      if (held) Deno.removeSignalListener("SIGINT", interrupt);
      held = false;
    },
  };
}

const FLAGS = {
  ...SHAPE_FLAGS,
  comm: { type: "string" },
  "comm-delay": { type: "string" },
  "memory-limit": { type: "string" },
  steps: { type: "string" },
  backend: { type: "string" },
  json: { type: "boolean" },
  ...GPT_FLAGS,
  "data-parallel": { type: "string" },
  "shard-optimizer": { type: "boolean" },
  threads: { type: "string" },
  lr: { type: "string" },
  "in-process": { type: "boolean" },
  trace: { type: "string" },
  "lr-schedule": { type: "string" },
  "warmup-steps": { type: "string" },
  "min-lr": { type: "string" },
  "decay-steps": { type: "string" },
  "lr-gamma": { type: "string" },
  "save-checkpoint": { type: "string" },
  resume: { type: "string" },
  "trace-step": { type: "string" },
  metrics: { type: "string" },
  curves: { type: "string" },
  ...DATA_FLAGS,
} as const;

/** The `data` key of a `train` checkpoint holding the batch Rng's state (JSON). */
const BATCH_RNG = "batch_rng";

export type { TrainParamsJson, TrainStepJson } from "./_train_json.ts";

const USAGE = `Usage: cli.ts train --schedule NAME --ranks P --microbatches M [options]
       mpirun -n D·P deno run -A cli.ts train --comm mpi --ranks P [--data-parallel D] [options]

Trains the tiny character-level GPT on the shipped corpus (or --text FILE; or
fine-tunes a GPT-2-format folder, --model DIR) across P pipeline
ranks (one Deno worker each, or one process each under mpirun) with the
given schedule, and prints the loss,
the measured bubble and makespan of every step, then the sum and sum of
squares of all parameters. --ranks 1 is single-device training (one rank).
Weights come from --seed S, batches from Rng(S + 1); AdamW, weight decay 0.

Options:
${shapeFlagsHelp()}
  --comm-delay T         zb-auto, v-half, v-min: the delay their search assumes when a
                         result crosses ranks (default 0; the --comm T of schedule, simulate)
  --memory-limit N       zb-auto, v-half, v-min: in-flight activations per rank their search
                         allows (default P; v-half ⌊(P+2)/2⌋, v-min ⌊(P+4)/3⌋)
  --steps K              training steps (default 3)
  --seed S               seed of the weights and the batches (integer, default 1)
  --backend KIND         cpu | webgpu | auto (default auto)
  --threads T            CPU threads of each rank (default: the cores shared by the
                         ranks, max(1, floor(cores / (P·D))))
  --batch N              sequences per step (default max(8, M·D))
  --data-parallel D      D replicas of the pipeline (D·P ranks), each step's batch cut
                         into D equal shards, gradients averaged (default 1)
  --shard-optimizer      ZeRO-1: each replica keeps and steps 1/D of the AdamW state;
                         gradients reduce-scattered, parameters all-gathered
  --seq-len N            characters per sequence (default 16)
  --dim N                model width (default 16)
  --heads N              attention heads, dividing --dim (default 2)
  --layers N             Transformer blocks (default max(2, P·V − 3): enough for P·V stages)
  --lr X                 AdamW base learning rate (default 0.01)
  --lr-schedule KIND     constant | warmup-cosine | step (default constant); the lr of
                         step t (from 0) is PyTorch's LinearLR / CosineAnnealingLR /
                         StepLR at t, composed as SequentialLR (see lrAt)
  --warmup-steps N       linear warmup from lr/3 over N steps first (default 0)
  --decay-steps N        warmup-cosine: steps of the cosine after the warmup (default:
                         to this run's last step); step: steps between decays (required)
  --min-lr X             warmup-cosine: the cosine's floor (default 0)
  --lr-gamma X           step: factor per decay (default 0.1)
  --save-checkpoint PATH write a training checkpoint at the end (weights, AdamW state,
                         step count, batch order), or at a Ctrl-C: the window of
                         10 steps running ends, the outputs are written, exit 130
  --resume PATH          start from a checkpoint: steps continue from its step N + 1,
                         batches from its stored order (same model flags; give
                         --decay-steps when splitting a warmup-cosine run)
  --comm KIND            where the ranks run: workers (default), in-process, or mpi (one
                         process per rank, started by mpirun -n D·P; rank 0 prints)
  --in-process           run every rank in this thread (--comm in-process)
  --trace PATH           write the last step's timeline (.svg, else Chrome trace JSON)
  --trace-step N|all     the step --trace draws (N as the step lines number it), or all
                         of the run's steps (one block of rank lanes per step)
  --metrics PATH         a line per step: CSV for a .csv path, else JSON Lines
  --curves PATH          the loss curve as an SVG picture, written at the end
${DATA_HELP}
  --json                 one JSON line per step {"step", "loss", "bubble", "makespanMs",
                         "lr"}, then {"paramSum", "paramSumSq"}; a step whose loss or
                         gradient is not finite is skipped (it changes nothing and still
                         counts): its line adds "skipped": true and "nonFinite" (where)
${HELP_LINE}
`;

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

// Steps run back to back in windows (consecutive steps interlock inside a
// window); a window's lines are printed when it ends.
const GROUP = 10;

/** The checkpoint's bytes and its step, read before any worker starts. */
async function readResume(path: string): Promise<Uint8Array> {
  if (path === "") throw new UsageError("--resume needs a path");
  try {
    return await Deno.readFile(path);
  } catch (e) {
    throw new UsageError(`--resume: cannot read ${path}: ${(e as Error).message}`);
  }
}

// The schedule flags of train: the shape, and zb-auto's delay under --comm-delay.
function readSpec(values: Record<string, unknown>): ScheduleSpec {
  return readScheduleSpec(values, SCHEDULE_REGISTRY, "comm-delay");
}

async function run(parsed: FlagValues, io: CliIo): Promise<number> {
  const { comm, values } = readTrainComm(parsed);
  if (comm !== "mpi") return await train(values, comm, null, io);
  // Under mpirun every process checks the launch the same way: rank 0
  // alone reports a bad one, so that it reads as one line.
  const quiet = launchRank() !== 0;
  let launch: MpiLaunch;
  try {
    launch = checkMpiLaunch(
      readSpec(values).ranks,
      positiveInt(values, "data-parallel", false) ?? 1,
    );
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
  const spec = readSpec(values);
  const steps = positiveInt(values, "steps", false) ?? 3;
  const backend = values.backend ?? "auto";
  if (backend !== "cpu" && backend !== "webgpu" && backend !== "auto") {
    throw new UsageError(`--backend must be cpu, webgpu or auto, got ${JSON.stringify(backend)}`);
  }
  const replicas = positiveInt(values, "data-parallel", false) ?? 1;
  const threads = positiveInt(values, "threads", false);
  const gpt = readGptFlags(values, Math.max(8, spec.microBatches * replicas), spec.microBatches);
  const { batch, seqLen, dim, heads, seed } = gpt;
  if (replicas > 1 && (batch % replicas !== 0 || batch / replicas < spec.microBatches)) {
    throw new UsageError(
      `--batch ${batch} cannot be cut into ${replicas} equal shards (--data-parallel ` +
        `${replicas}) of at least --microbatches ${spec.microBatches} sequences`,
    );
  }
  const lr = positiveNumber(values, "lr", 0.01);
  const schedule = buildSchedule(spec);
  const stages = schedule.stageToRank.length;
  const layers = gpt.layersFor(stages);
  if (layers + 3 < stages) {
    throw new UsageError(
      `--layers ${layers} gives ${layers + 3} layers (embedding, blocks, norm, head), ` +
        `fewer than the ${stages} stages of --ranks ${spec.ranks} × ${schedule.stagesPerRank}`,
    );
  }
  const outputs = readOutputs(values);
  const trace = outputs.trace, savePath = outputs["save-checkpoint"];
  const traceStep = readTraceStep(values);
  const resumePath = values.resume === undefined ? undefined : String(values.resume);
  const resumeBytes = resumePath === undefined ? undefined : await readResume(resumePath);
  // The checkpoint's step, for the default --decay-steps (the run's last step).
  let firstStep = 0;
  if (resumeBytes !== undefined) {
    try {
      firstStep = parseTrainingCheckpoint(resumeBytes).step;
    } catch (e) {
      throw new UsageError(`--resume ${resumePath}: ${(e as Error).message}`);
    }
  }
  const lrSchedule = readLrSchedule(values, firstStep + steps);
  if (typeof traceStep === "number" && (traceStep <= firstStep || traceStep > firstStep + steps)) {
    throw new UsageError(
      `--trace-step ${traceStep} is not a step of this run (steps ${firstStep + 1}–${
        firstStep + steps
      })`,
    );
  }
  const optimizer: OptimizerSpec = {
    kind: "adamw",
    lr,
    weightDecay: 0,
    ...(lrSchedule === undefined ? {} : { lrSchedule }),
  };

  const cpu = new CpuBackend();
  const data = await readTrainData(values, { seqLen, dim, heads, layers, seed }, cpu);
  // Checked before the built-in model is built (a --model folder's is already read).
  const { dim: d, heads: h, layers: l, vocabSize: vocab } = data;
  checkTrainMemory({
    batch,
    seqLen,
    dim: d,
    heads: h,
    layers: l,
    vocab,
    microBatches: spec.microBatches,
  });
  const net = data.net();
  const tokens = data.tokens;
  let rng = new Rng(seed + 1);
  let model: PipelineParallelModel;
  try {
    model = await PipelineParallelModel.create({
      model: net,
      schedule,
      optimizer,
      loss: "cross-entropy",
      backend,
      rankGroup: comm,
      ...(replicas === 1 ? {} : { dataParallel: replicas }),
      ...(values["shard-optimizer"] === true ? { shardOptimizer: true } : {}),
      ...(threads === undefined ? {} : { threads }),
      ...(resumeBytes === undefined ? {} : { resume: resumeBytes }),
      // Under MPI every process checks these against rank 0's (besides the model's own).
      ...(comm === "mpi"
        ? { sameOnEveryRank: { "--seed": seed, "--batch": batch, "--steps": steps } }
        : {}),
    });
  } catch (e) {
    // A checkpoint that does not fit these flags is a bad --resume value.
    if (e instanceof Error && e.message.startsWith("checkpoint:")) {
      throw new UsageError(`--resume ${resumePath}: ${e.message}`);
    }
    throw e;
  } finally {
    net.dispose();
  }
  const resumed = model.resumedFrom;
  if (resumed !== null) {
    const state = resumed.data[BATCH_RNG];
    try {
      if (state === undefined) {
        throw new Error(`it has no data.${BATCH_RNG} (not written by cli.ts train)`);
      }
      rng = Rng.fromState(JSON.parse(state) as RngState);
    } catch (e) {
      await model.dispose();
      throw new UsageError(`--resume ${resumePath}: no batch order: ${(e as Error).message}`);
    }
    const was = JSON.stringify(resumed.optimizer);
    const now = JSON.stringify(createOptimizer(optimizer, []).spec());
    if (was !== now) {
      io.err(
        `note: the checkpoint was written with optimizer ${was}; this run uses ${now} ` +
          "(the flags decide)\n",
      );
    }
  }
  let code = 0;
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
      // With "auto", the backend the ranks chose.
      const chosen = backend !== "auto"
        ? backend
        : `auto: ${[...new Set((await model.rankInfo()).map((r) => r.backend))].join(", ")}`;
      const what = values.model === undefined ? "tiny GPT" : `GPT-2 model ${values.model}`;
      io.out(
        `${what}: ${data.layers} block${
          data.layers === 1 ? "" : "s"
        }, dim ${data.dim}, ${data.heads} heads, ${nParams} parameters, ` +
          `vocabulary ${data.vocabSize}\n` +
          `pipeline: ${schedule.name}, ${schedule.ranks} rank${
            schedule.ranks === 1 ? "" : "s"
          } × ` +
          `${schedule.stagesPerRank} stage${schedule.stagesPerRank === 1 ? "" : "s"}` +
          `${replicas === 1 ? "" : ` × ${replicas} data-parallel replicas`}, ` +
          `${schedule.microBatches} micro-batches of a ${batch} × ${seqLen} batch, ` +
          `backend ${chosen}, ${model.rankGroup === "mpi" ? "MPI processes" : model.rankGroup}\n` +
          `stages (layers): ${
            model.partition.boundaries.slice(0, -1).map((b, s) =>
              `[${b}, ${model.partition.boundaries[s + 1]})`
            ).join(" ")
          }\n` +
          (resumed === null ? "" : `resumed from ${resumePath} at step ${resumed.step}\n`),
      );
    }
    const last = model.stepCount + steps;
    // Batches drawn as the windows need them: the Rng is exactly past the
    // batches trained, which is what a checkpoint stores.
    const batches = function* (): Generator<TrainingBatch> {
      for (let i = 0; i < steps; i++) {
        const b = sampleBatch(tokens, batch, seqLen, rng);
        yield { inputs: b.ids, shape: b.shape, targets: b.targets };
      }
    };
    // The lines come from a callback that reads each step's result (onStep would make
    // every step its own window).
    const lines: TrainCallback = {
      onStepEnd: (s: StepResult) => {
        const step = s.step + 1;
        if (values.json) {
          const line: TrainStepJson = {
            step,
            loss: s.loss,
            bubble: s.bubble,
            makespanMs: s.makespanMs,
            lr: s.lr,
            ...(s.skipped === true ? { skipped: true as const } : {}),
            ...(s.nonFinite === undefined ? {} : { nonFinite: s.nonFinite }),
          };
          io.out(JSON.stringify(line) + "\n");
        } else {
          const skipped = s.skipped === true
            ? `  skipped (non-finite ${s.nonFinite?.what ?? "value"})`
            : "";
          io.out(
            `step ${step}/${last}  loss ${s.loss.toFixed(4)}${skipped}  bubble ${
              (100 * s.bubble).toFixed(1)
            }%  makespan ${s.makespanMs.toFixed(1)} ms  peak activations ${
              s.peakActivationBytes.map(kib).join(", ")
            }  lr ${s.lr.toExponential(3)}\n`,
          );
        }
      },
    };
    // A Ctrl-C: the outputs are written as at the end, then exit 130.
    using interrupt = listenForInterrupt(model.rankGroup !== "mpi");
    const result = await model.train(batches(), {
      signal: interrupt.signal,
      window: GROUP,
      callbacks: [
        lines,
        ...(outputs.metrics === undefined ? [] : [new MetricsLogger(outputs.metrics)]),
        ...(outputs.curves === undefined ? [] : [
          new CurveWriter(outputs.curves, {
            title:
              `tiny GPT, ${schedule.name}: ${schedule.ranks} ranks, ${schedule.microBatches} ` +
              "micro-batches",
          }),
        ]),
      ],
    });
    interrupt[Symbol.dispose](); // the outputs are written without it
    if (result.aborted) {
      io.err(`interrupted (Ctrl-C) after step ${model.stepCount} of ${last}\n`);
      code = 130;
    }
    if (savePath !== undefined) {
      await model.saveCheckpoint(savePath, {
        data: { [BATCH_RNG]: JSON.stringify(rng.state()), seed: String(seed) },
      });
    }
    const saved = (model.localRank ?? 0) === 0
      ? await data.save(() => model.saveSafetensors())
      : null;
    if (trace !== undefined) {
      // Interrupted before --trace-step: the last step trained is drawn.
      const reached = typeof traceStep !== "number" || traceStep <= model.stepCount;
      if (!reached) io.err(`--trace-step ${traceStep} was not reached: the last step is drawn\n`);
      await model.writeTrace(
        trace,
        traceStep === undefined || !reached
          ? {}
          : { step: traceStep === "all" ? "all" : traceStep - 1 },
      );
    }
    const stats = await model.parameterStats();
    if (values.json) {
      const last: TrainParamsJson = { paramSum: stats.sum, paramSumSq: stats.sumSq };
      io.out(JSON.stringify(last) + "\n");
    } else {
      io.out(`parameters: sum ${stats.sum}, sum of squares ${stats.sumSq}\n`);
      if (trace !== undefined) io.out(`timeline written to ${trace}\n`);
      if (savePath !== undefined) io.out(`checkpoint written to ${savePath}\n`);
      if (saved !== null) io.out(`model written to ${saved} (GPT-2 format)\n`);
      if (outputs.metrics !== undefined) io.out(`metrics written to ${outputs.metrics}\n`);
      if (outputs.curves !== undefined) io.out(`curves written to ${outputs.curves}\n`);
    }
  } finally {
    await model.dispose();
  }
  return code;
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
export const trainCommand: CliCommand = flagCommand(
  {
    name: "train",
    summary: "train the tiny GPT across pipeline ranks: loss, bubble, makespan per step",
    usage: USAGE,
  },
  FLAGS,
  run,
  // The generator's cost flags model a schedule; training measures its own costs.
  Object.fromEntries(
    Object.keys(COST_FLAGS).filter((f) => !(f in FLAGS)).map((f) => [
      f,
      "the schedule generator's cost flags apply to schedule and simulate, not train",
    ]),
  ),
);
