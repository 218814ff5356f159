// Flags of a `deno run` bench script, read the same way in every one:
// `--help` prints the flags with their defaults and exits 0; an unknown flag,
// a flag without its value or a stray argument is one line on stderr naming
// it (with the nearest known flag) and exit code 2, not a stack trace. Used
// by the scripts in bench/; not exported from the package.

import type { parseArgs, ParseArgsConfig } from "node:util";
import { didYouMean, readFlags } from "../src/cli/command.ts";

/** A bench's flag table, as `parseArgs` takes it. */
export type BenchFlags = NonNullable<ParseArgsConfig["options"]>;

/** The values `parseArgs` gives for the flag table `O`. */
export type BenchValues<O extends BenchFlags> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: false }>
>["values"];

/**
 * The flags of bench script `script` (say `"bench/data_parallel.ts"`) from
 * `args`; `--help` lists `options` with their defaults and exits.
 *
 * @param script The script's path from the repository root, for messages.
 * @param options The flag table (`--help` is added).
 * @param args The command line (default `Deno.args`).
 * @returns The flags' values.
 */
export function benchArgs<const O extends BenchFlags>(
  script: string,
  options: O,
  args: string[] = Deno.args,
): BenchValues<O> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage(script, options));
    Deno.exit(0);
  }
  let read;
  try {
    read = readFlags(args, options);
  } catch (err) {
    fail(script, (err as Error).message.split("\n")[0]);
  }
  if ("values" in read) return read.values as BenchValues<O>;
  const p = read.problem;
  const known = Object.keys(options).map((k) => `--${k}`);
  fail(
    script,
    p.kind === "no-value"
      ? `${p.flag} needs a value`
      : p.kind === "unknown"
      ? `unknown flag ${p.flag}${didYouMean(p.flag, known)}`
      : p.kind === "positional"
      ? `unexpected argument ${JSON.stringify(p.arg)}`
      : p.message,
  );
}

// `--help`: the command, then each flag with its kind and default.
function usage(script: string, options: BenchFlags): string {
  const rows = Object.entries(options).map(([name, o]) => {
    const left = `--${name}${o.type === "string" ? " VALUE" : ""}`;
    const right = o.type === "boolean"
      ? "a switch"
      : o.default === undefined
      ? "no default"
      : `default ${o.default}`;
    return `  ${left.padEnd(26)} ${right}${o.multiple ? " (may be given more than once)" : ""}`;
  });
  return [
    `Usage: deno run -A ${script} [flags]`,
    "",
    ...rows,
    `  ${"--help".padEnd(26)} this text`,
    "",
    `What it measures and what each flag means: the comment at the top of ${script}.`,
  ].join("\n");
}

function fail(script: string, message: string): never {
  console.error(`${script}: ${message} (see --help)`);
  Deno.exit(2);
}

/**
 * The integer value of flag `--name` (its text `text`), or one line naming
 * the flag, the rule and the value, and exit code 2, when it is not an
 * integer of at least `min`.
 */
export function intFlag(script: string, name: string, text: unknown, min = 1): number {
  const n = typeof text === "string" && /^\s*-?\d+\s*$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min) {
    fail(script, `--${name} must be an integer ≥ ${min}, got ${JSON.stringify(text)}`);
  }
  return n;
}

/**
 * The number value of flag `--name` (its text `text`), or one line naming
 * the flag, the rule and the value, and exit code 2, when it is not a
 * finite number above 0.
 */
export function positiveFlag(script: string, name: string, text: unknown): number {
  const n = typeof text === "string" && text.trim() !== "" ? Number(text) : NaN;
  if (!Number.isFinite(n) || n <= 0) {
    fail(script, `--${name} must be a finite number > 0, got ${JSON.stringify(text)}`);
  }
  return n;
}
