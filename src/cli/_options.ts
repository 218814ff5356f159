// Flag parsing shared by the schedule-related subcommands. Not exported from
// the package.

import { parseArgs } from "node:util";
import type { Schedule } from "../pipeline/schedule/schedule.ts";
import type { ActionCosts } from "../pipeline/analysis/simulate.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../pipeline/schedule/generate.ts";
import { UsageError } from "./command.ts";

/** A parseArgs option table: every flag takes a string value or is a boolean. */
export type FlagTable = Record<string, { type: "string" | "boolean"; short?: string }>;

/** Flags that pick and build a schedule. */
export const SCHEDULE_FLAGS = {
  schedule: { type: "string" },
  stages: { type: "string" },
  microbatches: { type: "string" },
  "virtual-stages": { type: "string" },
  "cost-f": { type: "string" },
  "cost-b": { type: "string" },
  "cost-w": { type: "string" },
  comm: { type: "string" },
  "memory-limit": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagTable;

/** Help line of `--help`. */
export const HELP_LINE = "  -h, --help             this help";

/** Help lines for {@linkcode SCHEDULE_FLAGS}, all but `--help`. */
export function scheduleFlagsHelp(): string {
  return [
    `  --schedule NAME        one of: ${SCHEDULE_NAMES.join(", ")}`,
    "  --stages P             pipeline ranks (positive integer)",
    "  --microbatches M       micro-batches per step (positive integer)",
    "  --virtual-stages V     model chunks per rank (default: the schedule's own)",
    "  --cost-f T             forward time of one chunk and micro-batch (default 1)",
    "  --cost-b T             input-gradient backward time, the paper's T_B (default 1);",
    "                         a full backward costs T_B + T_W",
    "  --cost-w T             weight-gradient backward time (default 1)",
    "  --comm T               delay when a result crosses ranks (default 0)",
    "  --memory-limit N       in-flight activations per rank, for zb-auto (default P);",
    "                         zb-auto reads costs and memory per full stage (a rank's",
    "                         share of the model); a 2-chunk V result runs at half",
  ].join("\n");
}

/**
 * parseArgs with errors turned into UsageError naming the flag. A negative
 * number after a string flag (`--comm -1`) is taken as that flag's value so
 * the value check, not the parser, reports it.
 */
export function parseFlags<T extends FlagTable>(
  command: string,
  args: string[],
  options: T,
): Record<string, string | boolean | undefined> {
  const fixed: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const name = a.startsWith("--") ? a.slice(2) : "";
    const next = args[i + 1];
    if (
      options[name]?.type === "string" && next !== undefined && /^-\d|^-\.\d|^-Inf/.test(next)
    ) {
      fixed.push(`${a}=${next}`);
      i++;
    } else {
      fixed.push(a);
    }
  }
  try {
    const { values } = parseArgs({ args: fixed, options, strict: true, allowPositionals: false });
    return values as Record<string, string | boolean | undefined>;
  } catch (err) {
    const e = err as Error & { code?: string };
    const quoted = /'([^']*)'/.exec(e.message)?.[1] ?? "";
    switch (e.code) {
      case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
        throw new UsageError(`unknown flag ${quoted} for "${command}" (see ${command} --help)`);
      case "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL":
        throw new UsageError(
          `unexpected argument ${JSON.stringify(quoted)} for "${command}" (see ${command} --help)`,
        );
      case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
        throw new UsageError(`${e.message.split("\n")[0]} (${command})`);
      default:
        throw err;
    }
  }
}

// A number flag: undefined when absent, else its value if `valid` accepts
// the trimmed text and its number, else a UsageError naming the rule.
function numberFlag(
  values: Record<string, unknown>,
  flag: string,
  rule: string,
  valid: (text: string, n: number) => boolean,
): number | undefined {
  const v = values[flag];
  if (v === undefined) return undefined;
  const s = String(v).trim();
  const n = Number(s);
  if (!valid(s, n)) throw new UsageError(`--${flag} must be ${rule}, got ${JSON.stringify(v)}`);
  return n;
}

/** A required or optional positive-integer flag. */
export function positiveInt(
  values: Record<string, unknown>,
  flag: string,
  required: boolean,
): number | undefined {
  if (values[flag] === undefined && required) throw new UsageError(`--${flag} is required`);
  return numberFlag(
    values,
    flag,
    "a positive integer",
    (s, n) => /^\+?\d+$/.test(s) && Number.isSafeInteger(n) && n >= 1,
  );
}

/** An optional finite non-negative number flag. */
export function nonNegative(values: Record<string, unknown>, flag: string): number | undefined {
  return numberFlag(
    values,
    flag,
    "a finite number >= 0",
    (s, n) => s !== "" && Number.isFinite(n) && n >= 0,
  );
}

/** An integer flag, `fallback` when absent. */
export function integer(values: Record<string, unknown>, flag: string, fallback: number): number {
  return numberFlag(
    values,
    flag,
    "an integer",
    (s, n) => /^[+-]?\d+$/.test(s) && Number.isSafeInteger(n),
  ) ?? fallback;
}

/** A finite positive number flag, `fallback` when absent. */
export function positiveNumber(
  values: Record<string, unknown>,
  flag: string,
  fallback: number,
): number {
  return numberFlag(
    values,
    flag,
    "a finite number > 0",
    (s, n) => s !== "" && Number.isFinite(n) && n > 0,
  ) ?? fallback;
}

/** Uniform costs per action kind, as the simulator names them (I is `--cost-b`). */
export interface CliCosts extends ActionCosts {
  readonly F: number;
  readonly I: number;
  readonly W: number;
  readonly B: number;
}

/** Parsed schedule flags. */
export interface ScheduleSpec {
  readonly name: string;
  readonly ranks: number;
  readonly microBatches: number;
  readonly stagesPerRank?: number;
  readonly costs: CliCosts;
  readonly comm: number;
  readonly memoryLimit?: number;
}

/** Reads and checks the schedule flags, in the order the help lists them. */
export function readScheduleSpec(values: Record<string, unknown>): ScheduleSpec {
  const name = values.schedule;
  if (name === undefined) {
    throw new UsageError(`--schedule is required (one of ${SCHEDULE_NAMES.join(", ")})`);
  }
  if (!(SCHEDULE_NAMES as readonly string[]).includes(String(name))) {
    throw new UsageError(
      `--schedule must be one of ${SCHEDULE_NAMES.join(", ")}, got ${JSON.stringify(name)}`,
    );
  }
  const ranks = positiveInt(values, "stages", true)!;
  const microBatches = positiveInt(values, "microbatches", true)!;
  const stagesPerRank = positiveInt(values, "virtual-stages", false);
  const f = nonNegative(values, "cost-f") ?? 1;
  const b = nonNegative(values, "cost-b") ?? 1;
  const w = nonNegative(values, "cost-w") ?? 1;
  const comm = nonNegative(values, "comm") ?? 0;
  const memoryLimit = positiveInt(values, "memory-limit", false);
  // The CLI speaks the paper's T_F, T_B, T_W; the simulator calls the
  // input-gradient pass I and a fused full backward B = I + W.
  const costs: CliCosts = { F: f, I: b, W: w, B: b + w };
  return { name: String(name), ranks, microBatches, stagesPerRank, costs, comm, memoryLimit };
}

/**
 * Costs to simulate `schedule` with: the flags as given, except that
 * zb-auto takes them per full stage and runs a V-placement result's
 * chunks at 1/V of them (its search's convention).
 */
export function simulationCosts(spec: ScheduleSpec, schedule: Schedule): CliCosts {
  const V = spec.name === "zb-auto" ? schedule.stagesPerRank : 1;
  const c = spec.costs;
  return V === 1 ? c : { F: c.F / V, I: c.I / V, W: c.W / V, B: c.B / V };
}

/**
 * Generates the schedule; a RangeError or TypeError from the generator (a
 * combination it does not support) is a bad flag value: UsageError.
 */
export function buildSchedule(spec: ScheduleSpec): Schedule {
  try {
    return generateSchedule(spec.name, {
      ranks: spec.ranks,
      microBatches: spec.microBatches,
      stagesPerRank: spec.stagesPerRank,
      costs: spec.costs,
      comm: spec.comm,
      memoryLimit: spec.memoryLimit,
    });
  } catch (err) {
    if (err instanceof RangeError || err instanceof TypeError) {
      throw new UsageError(
        `${err.message} (--schedule ${spec.name} --stages ${spec.ranks} ` +
          `--microbatches ${spec.microBatches}` +
          (spec.stagesPerRank === undefined ? "" : ` --virtual-stages ${spec.stagesPerRank}`) +
          ")",
      );
    }
    throw err;
  }
}
