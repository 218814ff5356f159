/**
 * Action costs: the per-kind times of one stage's passes that the simulator,
 * the bubble estimates and the cost-aware generators (zb-auto) take, and
 * their resolution into per-stage tables.
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import { describeValue } from "../../text/describe.ts";

/** One cost for every stage, or one cost per global stage. */
export type CostValue = number | readonly number[];

/**
 * Time of one pass of one stage over one micro-batch, per action kind:
 * F forward, I input gradient, W weight gradient, B full backward.
 * Defaults: F = I = W = 1; when B is given and I is not, I = B − W;
 * B defaults to I + W. So the default is the Zero Bubble paper's equal-cost
 * convention T_F = T_B(I) = T_W with a full backward of 2.
 */
export interface ActionCosts {
  /** Forward. */
  readonly F?: CostValue;
  /** Full backward (input and weight gradients in one pass). */
  readonly B?: CostValue;
  /** Input-gradient pass (the paper's B). */
  readonly I?: CostValue;
  /** Weight-gradient pass. */
  readonly W?: CostValue;
}

/** Per-stage costs of each action kind, all finite and non-negative. */
export interface StageCosts {
  /** Forward, per stage. */
  readonly F: Float64Array;
  /** Full backward, per stage. */
  readonly B: Float64Array;
  /** Input-gradient pass, per stage. */
  readonly I: Float64Array;
  /** Weight-gradient pass, per stage. */
  readonly W: Float64Array;
}

function table(value: CostValue | undefined, name: string, stages: number): Float64Array | null {
  if (value === undefined) return null;
  const out = new Float64Array(stages);
  if (typeof value === "number") {
    if (!Number.isFinite(value) || value < 0) {
      throw new RangeError(
        `costs.${name} must be a finite number >= 0, got ${describeValue(value)}`,
      );
    }
    out.fill(value);
    return out;
  }
  if (!Array.isArray(value)) {
    throw new TypeError(
      `costs.${name} must be a number or an array of one number per stage, got ${typeof value}`,
    );
  }
  if (value.length !== stages) {
    throw new RangeError(
      `costs.${name} must have one entry per stage (${stages}), got ${value.length}`,
    );
  }
  for (let s = 0; s < stages; s++) {
    const v = value[s];
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new RangeError(
        `costs.${name}[${s}] must be a finite number >= 0, got ${describeValue(v)}`,
      );
    }
    out[s] = v;
  }
  return out;
}

/**
 * Resolves costs: F, I and W default to 1; when B is given and I is not,
 * I = B − W; B (full backward) defaults to I + W.
 */
export function resolveCosts(costs: ActionCosts | undefined, stages: number): StageCosts {
  if (costs !== undefined && (costs === null || typeof costs !== "object")) {
    throw new TypeError(`costs must be an object { F, B, I, W }, got ${describeValue(costs)}`);
  }
  const c = costs ?? {};
  checkOptionSpelling(c, ["F", "B", "I", "W"], "costs: ");
  const F = table(c.F, "F", stages) ?? new Float64Array(stages).fill(1);
  const W = table(c.W, "W", stages) ?? new Float64Array(stages).fill(1);
  const givenB = table(c.B, "B", stages);
  let I = table(c.I, "I", stages);
  if (I === null) {
    if (givenB === null) I = new Float64Array(stages).fill(1);
    else {
      I = new Float64Array(stages);
      for (let s = 0; s < stages; s++) {
        I[s] = givenB[s] - W[s];
        if (I[s] < 0) {
          throw new RangeError(
            `costs.I defaults to B − W, which is negative at stage ${s} ` +
              `(B ${givenB[s]}, W ${W[s]}); give costs.I explicitly`,
          );
        }
      }
    }
  }
  let B = givenB;
  if (B === null) {
    B = new Float64Array(stages);
    for (let s = 0; s < stages; s++) B[s] = I[s] + W[s];
  }
  return { F, B, I, W };
}

/** Checks a communication delay: finite and non-negative. */
export function checkComm(comm: unknown): number {
  if (comm === undefined) return 0;
  if (typeof comm !== "number" || !Number.isFinite(comm) || comm < 0) {
    throw new RangeError(`comm must be a finite number >= 0, got ${describeValue(comm)}`);
  }
  return comm;
}
