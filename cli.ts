/**
 * Conveyor's command line.
 *
 * ```sh
 * deno run -A cli.ts schedule --schedule zb-h1 --stages 4 --microbatches 8 --format text
 * deno run -A cli.ts simulate --schedule zb-h2 --stages 4 --microbatches 8 --iterations 4
 * deno run -A cli.ts train --schedule zb-h1 --stages 4 --microbatches 8 --steps 3 --seed 1
 * deno run -A cli.ts advise --ranks 2 --microbatches 8 --dim 128 --layers 6 --seq-len 64 --batch 16
 * deno run -A cli.ts --help
 * ```
 *
 * Each subcommand is a {@linkcode CliCommand} in `src/cli/`; {@linkcode main}
 * dispatches on the first argument. Exit codes: 0 success, 1 failure, 2 a bad
 * flag or value (with `error: …` naming it on stderr).
 *
 * @module
 */

import { type CliCommand, type CliIo, didYouMean, stdIo, UsageError } from "./src/cli/command.ts";
import { scheduleCommand } from "./src/cli/schedule.ts";
import { simulateCommand } from "./src/cli/simulate.ts";
import { trainCommand } from "./src/cli/train.ts";
import { adviseCommand } from "./src/cli/advise.ts";
import { generateCommand } from "./src/cli/generate.ts";

export type { CliCommand, CliIo } from "./src/cli/command.ts";
export { didYouMean, stdIo, UsageError } from "./src/cli/command.ts";
export type { ScheduleJson } from "./src/cli/schedule.ts";
export { scheduleCommand } from "./src/cli/schedule.ts";
export type { SimulateJson } from "./src/cli/simulate.ts";
export { simulateCommand } from "./src/cli/simulate.ts";
export type { TrainParamsJson, TrainStepJson } from "./src/cli/train.ts";
export { trainCommand } from "./src/cli/train.ts";
export type { AdviceJson } from "./src/cli/advise.ts";
// Types the commands' JSON contracts name, so that this entry point
// documents them on its own.
export type { NonFiniteReport } from "./src/pipeline/model/results.ts";
export type { RankMemory } from "./src/advise/rank_memory.ts";
export type { AdviceRow } from "./src/advise/advice_table.ts";
export type { CostFactors } from "./src/advise/step_prediction.ts";
export { adviseCommand } from "./src/cli/advise.ts";
export type { GenerateJson } from "./src/cli/generate.ts";
export { generateCommand } from "./src/cli/generate.ts";

/** The subcommands, in the order `--help` lists them. */
const COMMANDS: readonly CliCommand[] = [
  scheduleCommand,
  simulateCommand,
  trainCommand,
  generateCommand,
  adviseCommand,
];

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    "Usage: cli.ts <command> [options]",
    "",
    "Conveyor: pipeline-parallel training on Deno's WebGPU.",
    "",
    "Commands:",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    "Run `cli.ts <command> --help` for the options of a command.",
    "",
  ].join("\n");
}

/**
 * Runs the command line `args` (without the program name) and resolves to
 * the exit code; output goes to `io` (the process's stdout and stderr by
 * default). A bad flag or value, or a permission the run lacks (Deno's
 * `NotCapable`), prints `error: …` naming it and resolves to 2; any other
 * failure prints `error: …` and resolves to 1.
 *
 * @example
 * ```ts
 * import { main } from "@conveyor/core/cli";
 * let out = "";
 * const code = await main(
 *   ["schedule", "--schedule", "gpipe", "--stages", "2", "--microbatches", "2"],
 *   { out: (t) => void (out += t), err: () => {} },
 * );
 * console.log(code, JSON.parse(out).actions.length); // 0 2
 * ```
 */
export async function main(args: string[], io: CliIo = stdIo()): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined) {
    io.err(usage());
    return 2;
  }
  if (name === "-h" || name === "--help" || name === "help") {
    io.out(usage());
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    io.err(
      `error: unknown command ${JSON.stringify(name)}${
        didYouMean(name, COMMANDS.map((c) => c.name))
      }; commands: ${COMMANDS.map((c) => c.name).join(", ")} (see --help)\n`,
    );
    return 2;
  }
  try {
    return await command.run(rest, io);
  } catch (err) {
    // A bad flag, and a permission the launch lacks: the command line to fix.
    if (err instanceof UsageError || err instanceof Deno.errors.NotCapable) {
      io.err(`error: ${err.message}\n`);
      return 2;
    }
    io.err(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
