/**
 * Schedule generators by name, and the closed-form bubble estimates of the
 * reference sheet.
 *
 * @module
 */

import type { Schedule } from "./schedule.ts";
import { type ActionCosts, checkComm, resolveCosts } from "./costs.ts";
import { gpipe } from "./gpipe.ts";
import { oneFOneB } from "./one_f_one_b.ts";
import { interleavedOneFOneB, interleavedRounds } from "./interleaved_one_f_one_b.ts";
import { loopedBfs } from "./looped_bfs.ts";
import { zbH1 } from "./zb_h1.ts";
import { zbH2 } from "./zb_h2.ts";
import { zbV } from "./zb_v.ts";
import { zbAuto } from "./zb_auto.ts";
import { dualPipeV } from "./dualpipe_v.ts";

/**
 * Schedule names as the CLI spells them.
 *
 * @example
 * ```ts
 * import { SCHEDULE_NAMES } from "@conveyor/core";
 * console.log(SCHEDULE_NAMES.includes("zb-h1")); // true
 * ```
 */
export const SCHEDULE_NAMES = [
  "gpipe",
  "1f1b",
  "interleaved-1f1b",
  "looped-bfs",
  "zb-h1",
  "zb-h2",
  "zb-v",
  "zb-auto",
  "dualpipe-v",
] as const;

/** One of {@linkcode SCHEDULE_NAMES}. */
export type ScheduleName = typeof SCHEDULE_NAMES[number];

/** Options of {@linkcode generateSchedule}. */
export interface GenerateOptions {
  /** Pipeline ranks p (positive integer). */
  readonly ranks: number;
  /** Micro-batches m (positive integer). */
  readonly microBatches: number;
  /**
   * Model chunks per rank V. Default 2 for `interleaved-1f1b`, `looped-bfs`,
   * `zb-v` and `dualpipe-v`, else 1. `interleaved-1f1b` needs V ≥ 2,
   * `looped-bfs` V ≥ 1, `zb-v` and `dualpipe-v` exactly 2, the others 1.
   * `zb-auto`: unset searches one stage per rank and ZB-V's V placement and
   * returns either; 1 or 2 restricts the search to that placement.
   */
  readonly stagesPerRank?: number;
  /**
   * `zb-auto` only: costs per action kind (defaults F = I = W = 1, B = I + W)
   * per full stage (one rank's share of the model; arrays have p entries).
   * A V result splits full stage k into chunks 2k and 2k+1 at half the cost
   * each; simulate it with those chunk costs. The delay per hop stays.
   */
  readonly costs?: ActionCosts;
  /** `zb-auto` only: delay when a result crosses ranks (default 0). */
  readonly comm?: number;
  /**
   * `zb-auto` only: most activations in flight per rank, in full-stage
   * micro-batches (number ≥ 1; default p, 1F1B's memory; 2p−1 is ZB-H2's);
   * a chunk-micro-batch of a V result counts 1/2.
   */
  readonly memoryLimit?: number;
}

const MULTI_CHUNK: ReadonlySet<string> = new Set([
  "interleaved-1f1b",
  "looped-bfs",
  "zb-v",
  "dualpipe-v",
]);

// The most actions a generated schedule may hold (3 · ranks · microBatches ·
// stagesPerRank counts them, an I/W split's worst case): about 60 bytes
// each once built, so the limit keeps a schedule near 200 MiB.
const MAX_SCHEDULE_ACTIONS = 3_000_000;
const ACTION_BYTES = 64;

/**
 * Checks a schedule name (TypeError listing the valid names); for the
 * modules that take names beside {@linkcode generateSchedule}.
 */
export function checkScheduleName(name: unknown): ScheduleName {
  if (typeof name !== "string" || !(SCHEDULE_NAMES as readonly string[]).includes(name)) {
    throw new TypeError(
      `unknown schedule ${JSON.stringify(name)}; valid names: ${SCHEDULE_NAMES.join(", ")}`,
    );
  }
  return name as ScheduleName;
}

function checkPositiveInt(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new RangeError(`${what} must be a positive integer, got ${value}`);
  }
  return value;
}

/** Checks ranks, micro-batches and V (in that order) and each schedule's own rules; returns V. */
/**
 * Checks ranks, microBatches and stagesPerRank against the named schedule's
 * rules (RangeError naming the value) and returns its chunks per rank V.
 */
export function checkScheduleShape(
  name: ScheduleName,
  ranks: unknown,
  microBatches: unknown,
  stagesPerRank: unknown,
): number {
  const p = checkPositiveInt(ranks, "ranks");
  const m = checkPositiveInt(microBatches, "microBatches");
  const V = stagesPerRank === undefined
    ? (MULTI_CHUNK.has(name) ? 2 : 1)
    : checkPositiveInt(stagesPerRank, "stagesPerRank");
  // Refuse, before building anything, a schedule too large to hold in memory.
  const actions = 3 * p * m * V;
  if (actions > MAX_SCHEDULE_ACTIONS) {
    throw new RangeError(
      `ranks ${p} × microBatches ${m} × stagesPerRank ${V} gives up to ${
        actions.toExponential(2)
      } ` +
        `actions (F, I, W per chunk and micro-batch), over the limit of ${MAX_SCHEDULE_ACTIONS} ` +
        `(about ${Math.round(MAX_SCHEDULE_ACTIONS * ACTION_BYTES / 2 ** 20)} MiB)`,
    );
  }
  switch (name) {
    case "interleaved-1f1b": {
      if (V < 2) {
        throw new RangeError(`interleaved-1f1b needs stagesPerRank >= 2, got ${V}`);
      }
      const rounds = interleavedRounds(p, m);
      if (m % rounds !== 0) {
        throw new RangeError(
          `interleaved-1f1b runs micro-batches in max(1, floor(microBatches / ranks)) = ${rounds} ` +
            `equal rounds (PyTorch's rule), so microBatches must be a multiple of ${rounds}, ` +
            `got microBatches ${m} with ranks ${p}`,
        );
      }
      break;
    }
    case "looped-bfs":
      break;
    case "zb-auto":
      // Unset: the search tries both placements.
      if (stagesPerRank !== undefined && V !== 1 && V !== 2) {
        throw new RangeError(
          `zb-auto places 1 stage per rank or 2 in a V, got stagesPerRank ${V}`,
        );
      }
      break;
    case "zb-v":
    case "dualpipe-v":
      if (V !== 2) {
        throw new RangeError(`${name} places exactly 2 stages per rank, got stagesPerRank ${V}`);
      }
      if (name === "dualpipe-v" && m < 2 * p) {
        throw new RangeError(
          `dualpipe-v needs microBatches >= 2 × ranks (${
            2 * p
          }), got microBatches ${m} with ranks ${p}`,
        );
      }
      break;
    default:
      if (V !== 1) {
        throw new RangeError(`${name} places one stage per rank, got stagesPerRank ${V}`);
      }
  }
  return V;
}

/**
 * Builds a schedule by name. Checks run before any work, in this order: the
 * name (TypeError listing the valid names), ranks, microBatches,
 * stagesPerRank, the schedule's own rules, then costs, comm and memoryLimit
 * (RangeError naming the value and the rule).
 *
 * @example
 * ```ts
 * import { generateSchedule } from "@conveyor/core";
 * const s = generateSchedule("interleaved-1f1b", { ranks: 2, microBatches: 4 });
 * console.log(s.stagesPerRank, s.stageToRank); // 2 [ 0, 1, 0, 1 ]
 * ```
 */
export function generateSchedule(name: ScheduleName | string, options: GenerateOptions): Schedule {
  const n = checkScheduleName(name);
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object { ranks, microBatches, ... }, got ${options}`);
  }
  const { ranks: p, microBatches: m } = options;
  const V = checkScheduleShape(n, p, m, options.stagesPerRank);
  // zb-auto's costs are per full stage whatever placement it picks.
  const costs = resolveCosts(options.costs, n === "zb-auto" ? p : p * V);
  const comm = checkComm(options.comm);
  const limit = options.memoryLimit ?? p;
  if (typeof limit !== "number" || !(limit >= 1) || !Number.isFinite(limit)) {
    throw new RangeError(`memoryLimit must be a finite number >= 1, got ${options.memoryLimit}`);
  }
  switch (n) {
    case "gpipe":
      return gpipe(p, m);
    case "1f1b":
      return oneFOneB(p, m);
    case "interleaved-1f1b":
      return interleavedOneFOneB(p, m, V);
    case "looped-bfs":
      return loopedBfs(p, m, V);
    case "zb-h1":
      return zbH1(p, m);
    case "zb-h2":
      return zbH2(p, m);
    case "zb-v":
      return zbV(p, m);
    case "zb-auto":
      return zbAuto(p, m, costs, comm, limit, options.stagesPerRank === undefined ? undefined : V);
    case "dualpipe-v":
      return dualPipeV(p, m);
  }
}
