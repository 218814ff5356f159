// Flag parsing shared by the schedule-related subcommands. Not exported from
// the package.

import type { Schedule } from "../pipeline/schedule/schedule.ts";
import type { ActionCosts } from "../pipeline/analysis/simulate.ts";
import { SCHEDULE_REGISTRY } from "../pipeline/schedule/generate.ts";
import type { ScheduleRegistry } from "../pipeline/schedule/schedule_registry.ts";
import { type CliCommand, type CliIo, didYouMean, readFlags, UsageError } from "./command.ts";

/** A parseArgs option table: every flag takes a string value or is a boolean. */
export type FlagTable = Record<string, { type: "string" | "boolean"; short?: string }>;

/** Flags that pick a schedule and its shape (every schedule command takes them). */
export const SHAPE_FLAGS = {
  schedule: { type: "string" },
  ranks: { type: "string" },
  stages: { type: "string" },
  microbatches: { type: "string" },
  "virtual-stages": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagTable;

/** The schedule generator's cost model: per-kind costs, delay, memory limit. */
export const COST_FLAGS = {
  "cost-f": { type: "string" },
  "cost-i": { type: "string" },
  "cost-b": { type: "string" },
  "cost-w": { type: "string" },
  comm: { type: "string" },
  "memory-limit": { type: "string" },
} as const satisfies FlagTable;

/** Flags of `schedule` and `simulate`: the shape and the cost model. */
export const SCHEDULE_FLAGS = { ...SHAPE_FLAGS, ...COST_FLAGS } as const satisfies FlagTable;

/** Help line of `--help`. */
export const HELP_LINE = "  -h, --help             this help";

/** Help lines for {@linkcode SHAPE_FLAGS}, all but `--help`. */
export function shapeFlagsHelp(registry: ScheduleRegistry = SCHEDULE_REGISTRY): string {
  return [
    `  --schedule NAME        one of: ${registry.names.join(", ")}`,
    "  --ranks P              pipeline ranks (positive integer); --stages P is an alias",
    "  --microbatches M       micro-batches per step (positive integer)",
    "  --virtual-stages V     model stages per rank (default: the schedule's own)",
  ].join("\n");
}

/** Help lines for {@linkcode COST_FLAGS}. */
export function costFlagsHelp(registry: ScheduleRegistry = SCHEDULE_REGISTRY): string {
  const search = costAwareNames(registry);
  return [
    "  --cost-f T             F: forward time of one stage and micro-batch (default 1)",
    "  --cost-i T             I: input-gradient time (the Zero Bubble paper's T_B; default 1,",
    "                         or B − W when only --cost-b is given)",
    "  --cost-w T             W: weight-gradient time (default 1)",
    "  --cost-b T             B: full backward time, I + W in one pass (default I + W)",
    "  --comm T               delay when a result crosses ranks (default 0)",
    `  --memory-limit N       in-flight activations per rank, for ${search} (default P;`,
    "                         v-half ⌊(P+2)/2⌋, v-min ⌊(P+4)/3⌋);",
    `                         ${search} reads costs and memory per full stage (a rank's`,
    "                         share of the model); a 2-stage V result runs at half",
  ].join("\n");
}

/** Help lines for {@linkcode SCHEDULE_FLAGS}, all but `--help`. */
export function scheduleFlagsHelp(registry: ScheduleRegistry = SCHEDULE_REGISTRY): string {
  return shapeFlagsHelp(registry) + "\n" + costFlagsHelp(registry);
}

/** The names of the cost-aware schedules (those that read costs, comm and memory), joined. */
function costAwareNames(registry: ScheduleRegistry): string {
  return registry.definitions.filter((d) => d.costAware).map((d) => d.name).join(", ");
}

/** Flag values as {@linkcode parseFlags} returns them. */
export type FlagValues = Record<string, string | boolean | undefined>;

/**
 * A subcommand named `info.name` that parses `flags` (see
 * {@linkcode parseFlags}, with `hints` for flags it does not take), answers
 * `--help` with `info.usage` and otherwise runs `body` on the values;
 * resolves to the exit code.
 */
export function flagCommand(
  info: { readonly name: string; readonly summary: string; readonly usage: string },
  flags: FlagTable,
  body: (values: FlagValues, io: CliIo) => number | Promise<number>,
  hints: Readonly<Record<string, string>> = {},
): CliCommand {
  return {
    name: info.name,
    summary: info.summary,
    usage: info.usage,
    async run(args: string[], io: CliIo): Promise<number> {
      const values = parseFlags(info.name, args, flags, hints);
      if (values.help) {
        io.out(info.usage);
        return 0;
      }
      return await body(values, io);
    },
  };
}

/**
 * parseArgs with errors turned into UsageError naming the flag: a string
 * flag without a value (last, or followed by another flag) is "--x needs a
 * value"; an unknown flag names the nearest known one ("did you mean"). A
 * negative number after a string flag (`--comm -1`) is taken as that
 * flag's value so the value check, not the parser, reports it. `hints`
 * gives, for flags this command does not take, where they do apply.
 */
export function parseFlags<T extends FlagTable>(
  command: string,
  args: string[],
  options: T,
  hints: Readonly<Record<string, string>> = {},
): FlagValues {
  const read = readFlags(args, options);
  if ("values" in read) return read.values as FlagValues;
  const p = read.problem;
  switch (p.kind) {
    case "no-value":
      throw new UsageError(`${p.flag} needs a value (${command})`);
    case "unknown": {
      const hint = hints[p.flag.replace(/^-+/, "")];
      const known = Object.keys(options).map((k) => `--${k}`);
      throw new UsageError(
        `unknown flag ${p.flag} for "${command}"` +
          (hint === undefined ? didYouMean(p.flag, known) : `: ${hint}`) +
          ` (see ${command} --help)`,
      );
    }
    case "positional":
      throw new UsageError(
        `unexpected argument ${JSON.stringify(p.arg)} for "${command}" (see ${command} --help)`,
      );
    case "invalid":
      throw new UsageError(`${p.message} (${command})`);
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

/** Uniform costs per action kind, resolved as the simulator resolves them. */
export interface CliCosts extends ActionCosts {
  readonly F: number;
  readonly I: number;
  readonly W: number;
  readonly B: number;
}

/** Parsed schedule flags. */
export interface ScheduleSpec {
  readonly name: string;
  /** Whether the named schedule's generator reads costs, comm and memoryLimit. */
  readonly costAware: boolean;
  readonly ranks: number;
  readonly microBatches: number;
  readonly stagesPerRank?: number;
  readonly costs: CliCosts;
  readonly comm: number;
  readonly memoryLimit?: number;
}

/**
 * The rank count: `--ranks P`, or its alias `--stages P` (the flag's
 * earlier name; both given must agree).
 */
export function readRanks(values: Record<string, unknown>): number {
  const ranks = positiveInt(values, "ranks", false);
  const stages = positiveInt(values, "stages", false);
  if (ranks !== undefined && stages !== undefined && ranks !== stages) {
    throw new UsageError(
      `--ranks ${ranks} and --stages ${stages} disagree (--stages is an alias of --ranks)`,
    );
  }
  const p = ranks ?? stages;
  if (p === undefined) throw new UsageError("--ranks is required (or its alias --stages)");
  return p;
}

/**
 * Reads and checks the schedule flags, in the order the help lists them.
 * `delayFlag` names the flag of the communication delay (`comm` by default).
 */
export function readScheduleSpec(
  values: Record<string, unknown>,
  registry: ScheduleRegistry = SCHEDULE_REGISTRY,
  delayFlag = "comm",
): ScheduleSpec {
  const name = values.schedule;
  const names = registry.names.join(", ");
  if (name === undefined) {
    throw new UsageError(`--schedule is required (one of ${names})`);
  }
  if (!registry.names.includes(String(name))) {
    throw new UsageError(
      `--schedule must be one of ${names}, got ${JSON.stringify(name)}` +
        didYouMean(String(name), registry.names),
    );
  }
  const costAware = registry.definition(String(name)).costAware === true;
  const ranks = readRanks(values);
  const microBatches = positiveInt(values, "microbatches", true)!;
  const stagesPerRank = positiveInt(values, "virtual-stages", false);
  const f = nonNegative(values, "cost-f") ?? 1;
  const i = nonNegative(values, "cost-i");
  const w = nonNegative(values, "cost-w") ?? 1;
  const b = nonNegative(values, "cost-b");
  const comm = nonNegative(values, delayFlag) ?? 0;
  const memoryLimit = positiveInt(values, "memory-limit", false);
  if (memoryLimit !== undefined && !costAware) {
    throw new UsageError(
      `--memory-limit applies only to the schedules that search with it (${
        costAwareNames(registry)
      }); ${
        String(name)
      }'s memory is fixed by its construction (got --memory-limit ${memoryLimit} with ` +
        `--schedule ${String(name)})`,
    );
  }
  // PyTorch's letters, resolved as the API's ActionCosts: I defaults to 1,
  // or to B − W when only B is given; B defaults to I + W.
  if (i === undefined && b !== undefined && b < w) {
    throw new UsageError(
      `--cost-b ${b} is below --cost-w ${w}: the full backward B = I + W includes W`,
    );
  }
  const I = i ?? (b === undefined ? 1 : b - w);
  const costs: CliCosts = { F: f, I, W: w, B: b ?? I + w };
  return {
    name: String(name),
    costAware,
    ranks,
    microBatches,
    stagesPerRank,
    costs,
    comm,
    memoryLimit,
  };
}

/**
 * Costs to simulate `schedule` with: the flags as given, except that a
 * cost-aware schedule (zb-auto, v-half, v-min) takes them per full stage and runs a
 * V-placement result's stages at 1/V of them (its search's convention).
 */
export function simulationCosts(spec: ScheduleSpec, schedule: Schedule): CliCosts {
  const V = spec.costAware ? schedule.stagesPerRank : 1;
  const c = spec.costs;
  return V === 1 ? c : { F: c.F / V, I: c.I / V, W: c.W / V, B: c.B / V };
}

/**
 * Generates the schedule; a RangeError or TypeError from the generator (a
 * combination it does not support) is a bad flag value: UsageError.
 */
export function buildSchedule(
  spec: ScheduleSpec,
  registry: ScheduleRegistry = SCHEDULE_REGISTRY,
): Schedule {
  try {
    return registry.generate(spec.name, {
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
        `${err.message} (--schedule ${spec.name} --ranks ${spec.ranks} ` +
          `--microbatches ${spec.microBatches}` +
          (spec.stagesPerRank === undefined ? "" : ` --virtual-stages ${spec.stagesPerRank}`) +
          ")",
      );
    }
    throw err;
  }
}

/**
 * Bytes from flag `--<name>`: a number with an optional unit (B, KiB, MiB,
 * GiB, TiB, KB, MB, GB, TB); undefined when absent. `zero` allows 0.
 */
export function readBytesFlag(
  values: FlagValues,
  name: string,
  zero = false,
): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kib|mib|gib|tib|kb|mb|gb|tb)?\s*$/i.exec(String(v));
  const unit: Record<string, number> = {
    b: 1,
    kib: 2 ** 10,
    mib: 2 ** 20,
    gib: 2 ** 30,
    tib: 2 ** 40,
    kb: 1e3,
    mb: 1e6,
    gb: 1e9,
    tb: 1e12,
  };
  const bytes = m === null ? NaN : Number(m[1]) * unit[(m[2] ?? "b").toLowerCase()];
  if (!(bytes > 0 || (zero && bytes === 0)) || !Number.isFinite(bytes)) {
    throw new UsageError(
      `--${name} must be a ${
        zero ? "non-negative" : "positive"
      } number of bytes with an optional unit (512MiB, 2GiB), got ${JSON.stringify(v)}`,
    );
  }
  return bytes;
}
