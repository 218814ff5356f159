// Flags of a `deno run` bench script, read the same way in every one:
// `--help` prints the flags with their defaults and exits 0; an unknown flag,
// a flag without its value or a stray argument is one line on stderr naming
// it (with the nearest known flag) and exit code 2, not a stack trace. Used
// by the scripts in bench/; not exported from the package.

import { parseArgs, type ParseArgsConfig } from "node:util";
import { didYouMean } from "../src/cli/command.ts";

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
  // A negative number after a value flag (`--steps -1`) is that flag's
  // value, for the bench's own check to refuse; any other flag there means
  // the value is missing.
  const fixed: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = args[i].startsWith("--") && !args[i].includes("=") ? args[i].slice(2) : "";
    const next = args[i + 1];
    if (options[name]?.type === "string") {
      if (next !== undefined && /^-(\d|\.\d|Inf)/.test(next)) {
        fixed.push(`${args[i]}=${next}`);
        i++;
        continue;
      }
      if (next === undefined || next.startsWith("-")) fail(script, `--${name} needs a value`);
    }
    fixed.push(args[i]);
  }
  try {
    return parseArgs({ args: fixed, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    const e = err as Error & { code?: string };
    const quoted = /'([^']*)'/.exec(e.message)?.[1] ?? "";
    if (e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const flag = quoted.split("=")[0];
      const known = Object.keys(options).map((k) => `--${k}`);
      fail(script, `unknown flag ${flag}${didYouMean(flag, known)}`);
    }
    if (e.code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
      fail(script, `unexpected argument ${JSON.stringify(quoted)}`);
    }
    fail(script, e.message.split("\n")[0]);
  }
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
