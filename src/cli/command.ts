/**
 * What every `cli.ts` subcommand implements, and the error that makes the CLI
 * exit with code 2 (bad flag or value). A new subcommand is a module in
 * `src/cli/` exporting a {@linkcode CliCommand}, listed in `cli.ts`.
 *
 * @module
 */

import { parseArgs, type ParseArgsConfig } from "node:util";
import { nearestName } from "../text/nearest.ts";

/** Where a command writes: stdout and stderr, replaceable for tests. */
export interface CliIo {
  /** Writes text to standard output as is (add the newline yourself). */
  out(text: string): void;
  /** Writes text to standard error as is (add the newline yourself). */
  err(text: string): void;
}

/** One subcommand of `cli.ts`. */
export interface CliCommand {
  /** Name on the command line, e.g. `"schedule"`. */
  readonly name: string;
  /** One line for the command list of `--help`. */
  readonly summary: string;
  /** Full help text of the command (`cli.ts NAME --help`). */
  readonly usage: string;
  /**
   * Runs the command with the arguments after its name; resolves to the exit
   * code. Throws {@linkcode UsageError} for a bad flag or value (exit code 2).
   */
  run(args: string[], io: CliIo): Promise<number>;
}

/**
 * A bad flag or flag value. `cli.ts` prints `error: <message>` on stderr and
 * exits with code 2.
 *
 * @example
 * ```ts
 * import { UsageError } from "@conveyor/core/cli";
 * const e = new UsageError('--ranks must be a positive integer, got "x"');
 * console.log(e.name); // "UsageError"
 * ```
 */
export class UsageError extends Error {
  /** Creates the error with a message that names the flag and the value. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * The process's stdout and stderr, written synchronously so that output is
 * complete before the process exits.
 *
 * @example
 * ```ts
 * import { stdIo } from "@conveyor/core/cli";
 * stdIo().out("hello\n");
 * ```
 */
export function stdIo(): CliIo {
  const encoder = new TextEncoder();
  const write = (file: { writeSync(p: Uint8Array): number }, text: string): void => {
    let bytes = encoder.encode(text);
    while (bytes.length > 0) bytes = bytes.subarray(file.writeSync(bytes));
  };
  return { out: (t) => write(Deno.stdout, t), err: (t) => write(Deno.stderr, t) };
}

/**
 * `"; did you mean X?"` for the candidate nearest to `word` by edit distance,
 * ignoring case (at most 2 edits, or a third of the word), else `""`. Ties go to the
 * earlier candidate.
 *
 * @example
 * ```ts
 * import { didYouMean } from "@conveyor/core/cli";
 * console.log(didYouMean("--rnaks", ["--ranks", "--steps"])); // "; did you mean --ranks?"
 * console.log(didYouMean("--xyz", ["--ranks"]) === ""); // true
 * ```
 */
export function didYouMean(word: string, candidates: readonly string[]): string {
  const best = nearestName(word, candidates);
  return best === undefined ? "" : `; did you mean ${best}?`;
}

/** What {@linkcode readFlags} found wrong with a command line. */
export type FlagProblem =
  /** A value flag last, or followed by another flag (`flag`: "--x"). */
  | { readonly kind: "no-value"; readonly flag: string }
  /** A flag the table does not have (`flag`: "--x", without any "=value"). */
  | { readonly kind: "unknown"; readonly flag: string }
  /** An argument that is not a flag. */
  | { readonly kind: "positional"; readonly arg: string }
  /** A value the parser refused (a value given to a switch); its first line. */
  | { readonly kind: "invalid"; readonly message: string };

/**
 * `parseArgs` (strict, no positionals) over `args`, with what is wrong as a
 * {@linkcode FlagProblem} rather than an exception: a value flag with no
 * value (last, or followed by another flag), an unknown flag, a stray
 * argument, a refused value. A negative number after a value flag
 * (`--steps -1`) is taken as that flag's value, so the caller's own check,
 * not the parser, reports it. The CLI's commands and the bench scripts read
 * their flags through it, each wording the problem its own way.
 *
 * @param args The command line.
 * @param options The flag table, as `parseArgs` takes it.
 * @returns The values, or the first problem.
 * @throws {Error} What `parseArgs` throws for any other reason.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { readFlags } from "./command.ts";
 * const table = { steps: { type: "string" }, json: { type: "boolean" } } as const;
 * assert.deepEqual(readFlags(["--steps", "-1"], table), { values: { steps: "-1" } });
 * assert.deepEqual(readFlags(["--steps"], table), { problem: { kind: "no-value", flag: "--steps" } });
 * assert.deepEqual(readFlags(["--stpes=3"], table), { problem: { kind: "unknown", flag: "--stpes" } });
 * ```
 */
export function readFlags(
  args: readonly string[],
  options: NonNullable<ParseArgsConfig["options"]>,
): { values: Record<string, unknown> } | { problem: FlagProblem } {
  const fixed: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const name = a.startsWith("--") && !a.includes("=") ? a.slice(2) : "";
    const next = args[i + 1];
    if (name !== "" && options[name]?.type === "string") {
      if (next !== undefined && /^-\d|^-\.\d|^-Inf/.test(next)) {
        fixed.push(`${a}=${next}`);
        i++;
        continue;
      }
      if (next === undefined || next.startsWith("-")) {
        return { problem: { kind: "no-value", flag: `--${name}` } };
      }
    }
    fixed.push(a);
  }
  try {
    const { values } = parseArgs({ args: fixed, options, strict: true, allowPositionals: false });
    return { values: { ...values } };
  } catch (err) {
    const e = err as Error & { code?: string };
    const quoted = /'([^']*)'/.exec(e.message)?.[1] ?? "";
    switch (e.code) {
      case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
        return { problem: { kind: "unknown", flag: quoted.split("=")[0] } };
      case "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL":
        return { problem: { kind: "positional", arg: quoted } };
      case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
        return { problem: { kind: "invalid", message: e.message.split("\n")[0] } };
      default:
        throw err;
    }
  }
}
