/**
 * What a schedule is to the rest of the package: a
 * {@linkcode ScheduleDefinition} (name, description, stages-per-rank rule,
 * generator, bubble formula), and a {@linkcode ScheduleRegistry} built from a
 * table of them that checks names and shapes, generates and estimates. The
 * package's table is `SCHEDULES` in `generate.ts`: a new schedule is one file
 * exporting its definition and one line in that table.
 *
 * @module
 */

import type { Schedule } from "./schedule.ts";
import { checkOptionSpelling, nearestName } from "../../text/nearest.ts";
import { type ActionCosts, checkComm, resolveCosts, type StageCosts } from "./costs.ts";
import { describeValue } from "../../text/describe.ts";

/** A schedule's shape, checked for positive integers before a definition sees it. */
export interface ScheduleShape {
  /** Pipeline ranks p. */
  readonly ranks: number;
  /** Micro-batches m. */
  readonly microBatches: number;
  /** Stages per rank V (the definition's default when not given). */
  readonly stagesPerRank: number;
  /** Whether the caller gave V (false: `stagesPerRank` is the default). */
  readonly stagesPerRankGiven: boolean;
}

/** What a generator gets: the checked shape and the checked cost-model inputs. */
export interface ScheduleInputs extends ScheduleShape {
  /**
   * Costs per action kind, one entry per global stage (p·V), or per rank (p)
   * for a definition with `costsPerRank`.
   */
  readonly costs: StageCosts;
  /** Delay when a result crosses ranks (≥ 0). */
  readonly comm: number;
  /** Most activations in flight per rank, in full-stage micro-batches (≥ 1; default p). */
  readonly memoryLimit: number;
}

/** Inputs of a bubble formula: the shape and one stage's cost of each kind. */
export interface BubbleInputs {
  /** Pipeline ranks p. */
  readonly ranks: number;
  /** Micro-batches m. */
  readonly microBatches: number;
  /** Stages per rank V. */
  readonly stagesPerRank: number;
  /** Forward cost f. */
  readonly f: number;
  /** Input-gradient cost i. */
  readonly i: number;
  /** Weight-gradient cost w. */
  readonly w: number;
  /** Full-backward cost b. */
  readonly b: number;
}

/**
 * One schedule: everything the package knows about it by name.
 *
 * @example
 * ```ts
 * import type { ScheduleDefinition } from "./schedule_registry.ts";
 * import { GPIPE } from "./gpipe.ts";
 * const d: ScheduleDefinition = GPIPE;
 * const bubble = d.bubble({ ranks: 4, microBatches: 8, stagesPerRank: 1, f: 1, i: 1, w: 1, b: 2 });
 * console.log(d.name, d.defaultStagesPerRank, bubble.toFixed(3)); // gpipe 1 0.273
 * ```
 */
export interface ScheduleDefinition<N extends string = string> {
  /** The name as the CLI and the API spell it, e.g. `"zb-h1"`. */
  readonly name: N;
  /** One line for help texts. */
  readonly description: string;
  /** Stages per rank V when the caller gives none. */
  readonly defaultStagesPerRank: number;
  /**
   * The schedule's own rules on the shape (the stages-per-rank rule among
   * them): throws a RangeError naming the value and the rule. Runs after the
   * generic checks (positive integers, size limit) and before any work.
   */
  checkShape(shape: ScheduleShape): void;
  /**
   * True when the generator reads costs, comm and memoryLimit (a cost-aware
   * search); its costs are then per rank (one full stage each), whatever V
   * it picks. Others are built from their rules alone.
   */
  readonly costAware?: boolean;
  /**
   * The memory limit (full stages' worth of micro-batches per rank) when
   * the caller gives none; p when absent. V-Half's and V-Min's are their
   * papers' limits.
   */
  defaultMemoryLimit?(ranks: number): number;
  /** Builds the action lists; its inputs are checked. */
  generate(inputs: ScheduleInputs): Schedule;
  /**
   * The closed-form bubble fraction, `idle / (busy + idle)` per rank, from
   * one stage's costs; `NaN` where there is none (simulate instead).
   */
  bubble(inputs: BubbleInputs): number;
}

/** Options of {@linkcode ScheduleRegistry.generate}. */
export interface GenerateOptions {
  /** Pipeline ranks p (positive integer). */
  readonly ranks: number;
  /** Micro-batches m (positive integer). */
  readonly microBatches: number;
  /**
   * Stages per rank V. Default: the schedule's own (2 for `interleaved-1f1b`,
   * `looped-bfs`, `zb-v` and `dualpipe-v`, else 1). `interleaved-1f1b` needs
   * V ≥ 2, `looped-bfs` V ≥ 1, `zb-v` and `dualpipe-v` exactly 2, the others
   * 1. `zb-auto`: unset searches one stage per rank and ZB-V's V placement
   * and returns either; 1 or 2 restricts the search to that placement.
   */
  readonly stagesPerRank?: number;
  /**
   * `zb-auto`, `v-half`, `v-min` only: costs per action kind (defaults
   * F = I = W = 1, B = I + W) per full stage (one rank's share of the model;
   * arrays have p entries). A V result splits full stage k into stages 2k and 2k+1 at half the cost
   * each; simulate it with those stage costs. The delay per hop stays.
   */
  readonly costs?: ActionCosts;
  /** `zb-auto`, `v-half`, `v-min` only: delay when a result crosses ranks (default 0). */
  readonly comm?: number;
  /**
   * `zb-auto`, `v-half`, `v-min` only: most activations in flight per rank,
   * in full-stage micro-batches (number ≥ 1); a stage-micro-batch of a V
   * result counts 1/2. Default p for `zb-auto` (1F1B's memory; 2p−1 is
   * ZB-H2's), ⌊(p+2)/2⌋ for `v-half`, ⌊(p+4)/3⌋ for `v-min`.
   */
  readonly memoryLimit?: number;
}

// The most actions a generated schedule may hold (3 · ranks · microBatches ·
// stagesPerRank counts them, an I/W split's worst case): about 60 bytes
// each once built, so the limit keeps a schedule near 200 MiB.
const MAX_SCHEDULE_ACTIONS = 3_000_000;
const ACTION_BYTES = 64;

/** Schedules by name, from a table of definitions: see {@linkcode createScheduleRegistry}. */
export interface ScheduleRegistry<N extends string = string> {
  /** The names, in the table's order. */
  readonly names: readonly N[];
  /** The definitions, in the table's order. */
  readonly definitions: readonly ScheduleDefinition<N>[];
  /** The definition of a name; TypeError listing the valid names. */
  definition(name: unknown): ScheduleDefinition<N>;
  /**
   * Checks ranks, microBatches and stagesPerRank (in that order) against the
   * generic rules and the schedule's own (RangeError naming the value);
   * returns V.
   */
  checkShape(name: N, ranks: unknown, microBatches: unknown, stagesPerRank: unknown): number;
  /**
   * Builds a schedule by name. Checks run before any work, in this order:
   * the name (TypeError listing the valid names), ranks, microBatches,
   * stagesPerRank, the schedule's own rules, then costs, comm and
   * memoryLimit (RangeError naming the value and the rule).
   */
  generate(name: N | string, options: GenerateOptions): Schedule;
  /**
   * The schedule's closed-form bubble fraction with one stage's costs (for
   * per-stage arrays the largest entry of each kind); arguments checked as
   * `generate` checks them.
   */
  estimateBubble(
    name: N | string,
    ranks: number,
    microBatches: number,
    costs?: ActionCosts,
    stagesPerRank?: number,
  ): number;
}

function checkPositiveInt(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new RangeError(`${what} must be a positive integer, got ${describeValue(value)}`);
  }
  return value;
}

/**
 * A registry over a table of definitions (names must be distinct). The
 * package's own is built from `SCHEDULES` in `generate.ts`; a registry over
 * a longer table serves a schedule of one's own without changing the
 * package's.
 *
 * @example
 * ```ts
 * import { createScheduleRegistry } from "./schedule_registry.ts";
 * import { GPIPE } from "./gpipe.ts";
 * const only = createScheduleRegistry([GPIPE]);
 * console.log(only.names, only.generate("gpipe", { ranks: 2, microBatches: 2 }).actions.length);
 * // [ "gpipe" ] 2
 * ```
 */
export function createScheduleRegistry<N extends string>(
  table: readonly ScheduleDefinition<N>[],
): ScheduleRegistry<N> {
  const byName = new Map<string, ScheduleDefinition<N>>();
  for (const d of table) {
    if (byName.has(d.name)) {
      throw new RangeError(`schedule ${JSON.stringify(d.name)} is in the table twice`);
    }
    byName.set(d.name, d);
  }
  const names = Object.freeze(table.map((d) => d.name));
  const definition = (name: unknown): ScheduleDefinition<N> => {
    const d = typeof name === "string" ? byName.get(name) : undefined;
    if (d === undefined) {
      throw new TypeError(
        `unknown schedule ${JSON.stringify(name)}; valid names: ${names.join(", ")}${
          typeof name === "string" && nearestName(name, names) !== undefined
            ? `; did you mean ${nearestName(name, names)}?`
            : ""
        }`,
      );
    }
    return d;
  };
  const shapeOf = (d: ScheduleDefinition<N>, p: unknown, mb: unknown, v: unknown) => {
    const ranks = checkPositiveInt(p, "ranks");
    const microBatches = checkPositiveInt(mb, "microBatches");
    const given = v !== undefined;
    const V = given ? checkPositiveInt(v, "stagesPerRank") : d.defaultStagesPerRank;
    // Refuse, before building anything, a schedule too large to hold in memory.
    const actions = 3 * ranks * microBatches * V;
    if (actions > MAX_SCHEDULE_ACTIONS) {
      throw new RangeError(
        `ranks ${ranks} × microBatches ${microBatches} × stagesPerRank ${V} gives up to ${
          actions.toExponential(2)
        } actions (F, I, W per stage and micro-batch), over the limit of ` +
          `${MAX_SCHEDULE_ACTIONS} (about ${
            Math.round(MAX_SCHEDULE_ACTIONS * ACTION_BYTES / 2 ** 20)
          } MiB)`,
      );
    }
    const shape: ScheduleShape = {
      ranks,
      microBatches,
      stagesPerRank: V,
      stagesPerRankGiven: given,
    };
    d.checkShape(shape);
    return shape;
  };
  return {
    names,
    definitions: Object.freeze([...table]),
    definition,
    checkShape: (name, ranks, microBatches, stagesPerRank) =>
      shapeOf(definition(name), ranks, microBatches, stagesPerRank).stagesPerRank,
    generate(name, options) {
      const d = definition(name);
      if (options === null || typeof options !== "object") {
        throw new TypeError(
          `options must be an object { ranks, microBatches, ... }, got ${describeValue(options)}`,
        );
      }
      checkOptionSpelling(options, OPTION_KEYS);
      const shape = shapeOf(d, options.ranks, options.microBatches, options.stagesPerRank);
      const p = shape.ranks;
      const costs = resolveCosts(options.costs, d.costAware ? p : p * shape.stagesPerRank);
      const comm = checkComm(options.comm);
      const memoryLimit = options.memoryLimit ?? d.defaultMemoryLimit?.(p) ?? p;
      if (
        typeof memoryLimit !== "number" || !(memoryLimit >= 1) || !Number.isFinite(memoryLimit)
      ) {
        throw new RangeError(
          `memoryLimit must be a finite number >= 1, got ${describeValue(options.memoryLimit)}`,
        );
      }
      return d.generate({ ...shape, costs, comm, memoryLimit });
    },
    estimateBubble(name, ranks, microBatches, costs, stagesPerRank) {
      const d = definition(name);
      const shape = shapeOf(d, ranks, microBatches, stagesPerRank);
      const c = resolveCosts(costs, shape.ranks * shape.stagesPerRank);
      const max = (a: Float64Array) => a.reduce((x, y) => (y > x ? y : x), 0);
      return d.bubble({
        ranks: shape.ranks,
        microBatches: shape.microBatches,
        stagesPerRank: shape.stagesPerRank,
        f: max(c.F),
        i: max(c.I),
        w: max(c.W),
        b: max(c.B),
      });
    },
  };
}

const OPTION_KEYS: readonly (keyof GenerateOptions)[] = [
  "ranks",
  "microBatches",
  "stagesPerRank",
  "costs",
  "comm",
  "memoryLimit",
];
