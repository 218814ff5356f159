/**
 * `cli.ts simulate`: generates a schedule, simulates it with the given costs,
 * communication delay and iterations, and prints makespan, busy and idle time
 * per rank, the bubble fraction (single run and steady state) and peak
 * in-flight activations; `--json` prints the same as one JSON object.
 *
 * @module
 */

import { renderAscii } from "../pipeline/render/render_ascii.ts";
import { simulate } from "../pipeline/analysis/simulate.ts";
import { rankBytes } from "../pipeline/analysis/rank_bytes.ts";
import { formatBytes } from "../advise/advice_table.ts";
import { type CliCommand, type CliIo, UsageError } from "./command.ts";
import {
  buildSchedule,
  flagCommand,
  type FlagValues,
  HELP_LINE,
  positiveInt,
  readBytesFlag,
  readScheduleSpec,
  SCHEDULE_FLAGS,
  scheduleFlagsHelp,
  simulationCosts,
} from "./_options.ts";

const FLAGS = {
  ...SCHEDULE_FLAGS,
  iterations: { type: "string" },
  json: { type: "boolean" },
  grid: { type: "boolean" },
  "activation-bytes": { type: "string" },
  "optimizer-bytes": { type: "string" },
  "shard-optimizer": { type: "string" },
} as const;

/** The JSON that `simulate --json` prints. Times are in the unit of the costs. */
export interface SimulateJson {
  /** Schedule name. */
  readonly schedule: string;
  /** Pipeline ranks P. */
  readonly ranks: number;
  /** Micro-batches M. */
  readonly microBatches: number;
  /** Model stages per rank V. */
  readonly stagesPerRank: number;
  /** Iterations simulated back to back. */
  readonly iterations: number;
  /** Costs per action kind as the simulator uses them (`--cost-f`, `--cost-i`, `--cost-w`, `--cost-b`). */
  readonly costs: {
    readonly F: number;
    readonly I: number;
    readonly W: number;
    readonly B: number;
  };
  /** Communication delay between ranks. */
  readonly comm: number;
  /** End of the last action. */
  readonly makespan: number;
  /** Busy time per rank. */
  readonly busy: readonly number[];
  /** Idle time per rank (makespan − busy). */
  readonly idle: readonly number[];
  /** Bubble fraction over the whole run. */
  readonly bubbleFraction: number;
  /** Bubble of one steady-state period; null with a single iteration. */
  readonly steadyStateBubble: number | null;
  /** Length of one steady-state period; null with a single iteration. */
  readonly period: number | null;
  /** Peak in-flight activations per rank, in stage-micro-batches. */
  readonly peakActivations: readonly number[];
  /** With `--activation-bytes`: peak activation bytes per rank (see `rankBytes`). */
  readonly activationBytes?: readonly number[];
  /** With `--optimizer-bytes`: optimizer-state bytes per rank, 1/D each with `--shard-optimizer D`. */
  readonly optimizerBytes?: readonly number[];
}

const USAGE = `Usage: cli.ts simulate --schedule NAME --ranks P --microbatches M [options]

Simulates a schedule and prints makespan, busy and idle time per rank, the
bubble fraction, the steady-state bubble (with --iterations 2 or more) and
peak in-flight activations per rank (in stage-micro-batches).

Options:
${scheduleFlagsHelp()}
  --iterations K         iterations back to back, no global barrier (default 1)
  --json                 print one JSON object instead of the table
  --grid                 also print the ASCII grid of the run
  --activation-bytes B   activations one micro-batch leaves on a full stage (a rank's
                         share of the model; a stage of V per rank holds 1/V): prints
                         peak activation bytes per rank (units: 512KiB, 3MB, …)
  --optimizer-bytes B    the whole model's optimizer state (AdamW: 8 bytes a parameter):
                         prints optimizer bytes per rank, its stages' share
  --shard-optimizer D    ZeRO-1: D data-parallel replicas share each rank's optimizer
                         state (1/D of it per rank; needs --optimizer-bytes)
${HELP_LINE}
`;

function num(v: number): string {
  return String(Number(v.toFixed(3)));
}

function pct(v: number): string {
  return `${(v * 100).toFixed(2)}%`;
}

function run(values: FlagValues, io: CliIo): number {
  const spec = readScheduleSpec(values);
  const iterations = positiveInt(values, "iterations", false) ?? 1;
  const schedule = buildSchedule(spec);
  let sim;
  try {
    sim = simulate(schedule, {
      costs: simulationCosts(spec, schedule),
      comm: spec.comm,
      iterations,
    });
  } catch (err) {
    // Too many events for one simulation: a bad combination of flags.
    if (err instanceof RangeError && /over the limit/.test(err.message)) {
      throw new UsageError(
        `${err.message} (--ranks ${spec.ranks} --microbatches ${spec.microBatches} ` +
          `--iterations ${iterations})`,
      );
    }
    throw err;
  }
  const c = spec.costs;
  const actBytes = readBytesFlag(values, "activation-bytes", true);
  const optBytes = readBytesFlag(values, "optimizer-bytes", true);
  const shard = positiveInt(values, "shard-optimizer", false);
  if (shard !== undefined && optBytes === undefined) {
    throw new UsageError(`--shard-optimizer ${shard} needs --optimizer-bytes (what it shares)`);
  }
  const bytes = rankBytes(schedule, sim.peakActivations, {
    activationBytes: actBytes ?? 0,
    optimizerBytes: optBytes ?? 0,
    shardOptimizer: shard ?? 1,
  });

  if (values.json) {
    const out: SimulateJson = {
      schedule: schedule.name,
      ranks: schedule.ranks,
      microBatches: schedule.microBatches,
      stagesPerRank: schedule.stagesPerRank,
      iterations,
      costs: { F: c.F, I: c.I, W: c.W, B: c.B },
      comm: spec.comm,
      makespan: sim.makespan,
      busy: sim.busy,
      idle: sim.idle,
      bubbleFraction: sim.bubbleFraction,
      steadyStateBubble: sim.steadyStateBubble ?? null,
      period: sim.period ?? null,
      peakActivations: sim.peakActivations,
      ...(actBytes === undefined ? {} : { activationBytes: bytes.activations }),
      ...(optBytes === undefined ? {} : { optimizerBytes: bytes.optimizer }),
    };
    io.out(JSON.stringify(out) + "\n");
  } else {
    const lines = [
      `schedule             ${schedule.name}  (ranks ${schedule.ranks}, micro-batches ${schedule.microBatches}, ` +
      `stages per rank ${schedule.stagesPerRank})`,
      `costs                F ${num(c.F)}, I ${num(c.I)}, W ${num(c.W)} (full backward B ${
        num(c.B)
      }), ` +
      `comm ${num(spec.comm)}; ${iterations} iteration${iterations === 1 ? "" : "s"}`,
      `makespan             ${num(sim.makespan)}`,
      `bubble               ${pct(sim.bubbleFraction)}`,
      sim.steadyStateBubble === undefined
        ? `steady-state bubble  - (needs --iterations 2 or more)`
        : `steady-state bubble  ${pct(sim.steadyStateBubble)}  (period ${num(sim.period ?? 0)})`,
      "",
      "rank  busy        idle        peak activations" +
      (actBytes === undefined ? "" : "  activation bytes") +
      (optBytes === undefined ? "" : "  optimizer bytes"),
      ...sim.busy.map((b, r) =>
        `${String(r).padEnd(6)}${num(b).padEnd(12)}${num(sim.idle[r]).padEnd(12)}${
          String(sim.peakActivations[r]).padEnd(18)
        }${actBytes === undefined ? "" : formatBytes(bytes.activations[r]).padEnd(18)}${
          optBytes === undefined ? "" : formatBytes(bytes.optimizer[r])
        }`.trimEnd()
      ),
    ];
    io.out(lines.join("\n") + "\n");
    if (values.grid) io.out("\n" + renderAscii(sim.events, { ranks: schedule.ranks }) + "\n");
  }
  return 0;
}

/**
 * The `simulate` subcommand.
 *
 * @example
 * ```ts
 * import { simulateCommand } from "@conveyor/core/cli";
 * let out = "";
 * const io = { out: (t: string) => void (out += t), err: () => {} };
 * await simulateCommand.run(
 *   ["--schedule", "gpipe", "--ranks", "4", "--microbatches", "8", "--json"],
 *   io,
 * );
 * console.log(JSON.parse(out).bubbleFraction.toFixed(3)); // "0.273"
 * ```
 */
export const simulateCommand: CliCommand = flagCommand(
  {
    name: "simulate",
    summary: "simulate a schedule: makespan, busy/idle per rank, bubble, peak activations",
    usage: USAGE,
  },
  FLAGS,
  run,
);
