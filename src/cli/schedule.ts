/**
 * `cli.ts schedule`: generates a schedule and prints it as JSON (the action
 * lists), CSV (PyTorch's compute-only format), an ASCII grid, an SVG timeline
 * or a Chrome trace (the last three of a simulated run with the given costs).
 *
 * @module
 */

import { renderAscii } from "../pipeline/render/render_ascii.ts";
import { renderSvg } from "../pipeline/render/render_svg.ts";
import { rankGrid } from "../pipeline/render/rank_grid.ts";
import { toChromeTrace } from "../pipeline/render/chrome_trace.ts";
import { scheduleToCsv } from "../pipeline/schedule/schedule_csv.ts";
import type { Schedule } from "../pipeline/schedule/schedule.ts";
import { simulate } from "../pipeline/analysis/simulate.ts";
import type { CliCommand, CliIo } from "./command.ts";
import { didYouMean, UsageError } from "./command.ts";
import {
  buildSchedule,
  flagCommand,
  type FlagValues,
  HELP_LINE,
  nonNegative,
  positiveInt,
  readScheduleSpec,
  SCHEDULE_FLAGS,
  scheduleFlagsHelp,
  simulationCosts,
} from "./_options.ts";

const FORMATS = ["json", "csv", "text", "svg", "trace"] as const;
type Format = typeof FORMATS[number];

const FLAGS = {
  ...SCHEDULE_FLAGS,
  format: { type: "string" },
  "data-parallel": { type: "string" },
  "gradient-time": { type: "string" },
} as const;

/** The JSON that `schedule --format json` prints, key order included. */
export interface ScheduleJson {
  /** Schedule name as given to `--schedule`. */
  readonly schedule: string;
  /** Pipeline ranks P. */
  readonly ranks: number;
  /** Micro-batches M. */
  readonly microBatches: number;
  /** Model stages per rank V. */
  readonly stagesPerRank: number;
  /** One list per rank, in execution order. */
  readonly actions: { kind: string; stage: number; microBatch: number }[][];
}

/**
 * The JSON form of a schedule: `{"schedule", "ranks", "microBatches",
 * "stagesPerRank", "actions"}` with actions as `{"kind", "stage",
 * "microBatch"}` objects (keys in that order), one list per rank.
 */
function scheduleJson(schedule: Schedule): ScheduleJson {
  return {
    schedule: schedule.name,
    ranks: schedule.ranks,
    microBatches: schedule.microBatches,
    stagesPerRank: schedule.stagesPerRank,
    actions: schedule.actions.map((row) =>
      row.map((a) => ({ kind: a.kind, stage: a.stage, microBatch: a.microBatch }))
    ),
  };
}

const USAGE = `Usage: cli.ts schedule --schedule NAME --ranks P --microbatches M [options]

Prints a pipeline schedule.

Options:
${scheduleFlagsHelp()}
  --format F             json (default): {"schedule","ranks","microBatches","stagesPerRank",
                           "actions"}, one action list per rank in execution order
                         csv: PyTorch's compute-only CSV, one row per rank
                         text: ASCII grid of a simulated run (ranks x time)
                         svg: SVG timeline of a simulated run
                         trace: Chrome trace JSON of a simulated run (1 unit = 1 ms)
  --data-parallel D      D replicas of the pipeline (text, the default then, or svg): the
                         grid of the D x P ranks, and each stage's ring all-reduce after its
                         last backward: 2(D-1)/D * G + 2(D-1) * comm (ARs on lines arN)
  --gradient-time G      time to send one stage's gradients over the link (default 1)
${HELP_LINE}
`;

function run(values: FlagValues, io: CliIo): number {
  const spec = readScheduleSpec(values);
  const dp = positiveInt(values, "data-parallel", false);
  const gradientBytes = nonNegative(values, "gradient-time") ?? 1;
  const format = (values.format ?? (dp === undefined ? "json" : "text")) as string;
  if (!(FORMATS as readonly string[]).includes(format)) {
    // What a user may call a format, by the words of the help: the ASCII grid is "text".
    const alias: Record<string, string> = { ascii: "text", grid: "text", chrome: "trace" };
    const hint = alias[format.toLowerCase()];
    throw new UsageError(
      `--format must be one of ${FORMATS.join(", ")}, got ${JSON.stringify(format)}` +
        (hint === undefined
          ? didYouMean(format, FORMATS)
          : `; did you mean ${hint}? (${hint === "text" ? "the ASCII grid" : "a Chrome trace"})`),
    );
  }
  if (dp !== undefined && format !== "text" && format !== "svg") {
    throw new UsageError(`--data-parallel needs --format text or svg, got ${format}`);
  }
  const link = { latencyMs: spec.comm, bytesPerMs: 1 };
  const data = dp === undefined ? {} : { dataParallel: dp, link, gradientBytes };
  const schedule = buildSchedule(spec);
  switch (format as Format) {
    case "json":
      io.out(JSON.stringify(scheduleJson(schedule)) + "\n");
      break;
    case "csv":
      io.out(scheduleToCsv(schedule.actions));
      break;
    default: {
      const costs = simulationCosts(spec, schedule);
      const sim = simulate(schedule, { costs, comm: spec.comm, ...data });
      const allReduce = sim.allReduce;
      if (format === "text") {
        if (dp !== undefined) io.out(rankGrid(schedule, dp) + "\n\n");
        io.out(renderAscii(sim.events, { ranks: schedule.ranks, allReduce }) + "\n");
      } else if (format === "svg") {
        const v = schedule.stagesPerRank > 1 ? ` v=${schedule.stagesPerRank}` : "";
        const d = dp === undefined ? "" : ` d=${dp}`;
        io.out(renderSvg(sim.events, {
          ranks: schedule.ranks,
          title: `${schedule.name}  p=${schedule.ranks} m=${schedule.microBatches}${v}${d}`,
          bubbleFraction: sim.bubbleFraction,
          allReduce,
        }));
      } else {
        io.out(JSON.stringify(toChromeTrace(sim.events, { ranks: schedule.ranks })) + "\n");
      }
    }
  }
  return 0;
}

/**
 * The `schedule` subcommand.
 *
 * @example
 * ```ts
 * import { scheduleCommand } from "@conveyor/core/cli";
 * let out = "";
 * const io = { out: (t: string) => void (out += t), err: () => {} };
 * await scheduleCommand.run(["--schedule", "1f1b", "--ranks", "2", "--microbatches", "2"], io);
 * console.log(JSON.parse(out).ranks); // 2
 * ```
 */
export const scheduleCommand: CliCommand = flagCommand(
  {
    name: "schedule",
    summary: "print a schedule as JSON, CSV, an ASCII grid, an SVG timeline or a Chrome trace",
    usage: USAGE,
  },
  FLAGS,
  run,
);
