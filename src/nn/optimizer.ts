/**
 * What every optimizer shares: parameter groups with their own learning rate
 * and weight decay, and the `Optimizer` interface.
 *
 * @module
 */

import * as ops from "../tensor/ops.ts";
import type { Tensor } from "../tensor/mod.ts";
import type { Parameter } from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/** Parameters with optional per-group hyper-parameters (defaults come from the optimizer). */
export interface ParamGroupSpec {
  /** The parameters of this group. */
  readonly params: readonly Parameter[];
  /** Learning rate of this group. */
  readonly lr?: number;
  /** Weight decay of this group. */
  readonly weightDecay?: number;
}

/** A parameter group as the optimizer holds it; `lr` and `weightDecay` may be changed between steps. */
export interface ParamGroup {
  /** The parameters of this group. */
  readonly params: readonly Parameter[];
  /** Learning rate (e.g. set by a schedule between steps). */
  lr: number;
  /** Weight decay. */
  weightDecay: number;
}

/**
 * An optimizer over parameter groups.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { AdamW, type Optimizer } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const lin = new Linear(be, 2, 2, { seed: 1 });
 * const opt: Optimizer = new AdamW(lin.parameters(), { lr: 1e-2 });
 * opt.step(); // gradients are zero here, so only weight decay acts
 * opt.zeroGrad();
 * console.log(opt.stepCount); // 1
 * opt.dispose();
 * lin.dispose();
 * ```
 */
export interface Optimizer {
  /** The parameter groups. */
  readonly groups: readonly ParamGroup[];
  /** Number of `step()` calls so far. */
  readonly stepCount: number;
  /** Updates every parameter from its accumulated gradient. */
  step(): void;
  /** Sets every gradient to zero. */
  zeroGrad(): void;
  /** Releases the optimizer state (moments, momentum buffers). */
  dispose(): void;
}

/** Throws a RangeError unless `value` is a finite number ≥ 0. */
export function checkNonNegative(where: string, what: string, value: number): void {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(
      `${where}: ${what} must be a finite number ≥ 0, got ${describeValue(value)}`,
    );
  }
}

/** Throws a RangeError unless `value` lies in [0, 1) (decays, momentum). */
export function checkFraction(where: string, what: string, value: number): void {
  if (typeof value !== "number" || !(value >= 0 && value < 1)) {
    throw new RangeError(`${where}: ${what} must lie in [0, 1), got ${describeValue(value)}`);
  }
}

/**
 * Checks every group's `lr` and `weightDecay` again before a step: callers
 * may have changed them since the groups were made.
 */
export function checkGroups(where: string, groups: readonly ParamGroup[]): void {
  for (const g of groups) {
    checkNonNegative(where, "lr", g.lr);
    checkNonNegative(where, "weightDecay", g.weightDecay);
  }
}

/**
 * Normalises `Parameter[]` or group specs into groups, filling defaults, and
 * checks every value (before any state is created).
 */
export function makeGroups(
  where: string,
  params: readonly Parameter[] | readonly ParamGroupSpec[],
  defaults: { lr: number; weightDecay: number },
): ParamGroup[] {
  if (!Array.isArray(params)) {
    throw new TypeError(`${where}: params must be an array, got ${describeValue(params)}`);
  }
  const specs: readonly ParamGroupSpec[] = params.length > 0 && "params" in params[0]
    ? params as readonly ParamGroupSpec[]
    : [{ params: params as readonly Parameter[] }];
  const seen = new Set<Tensor>();
  return specs.map((s, gi) => {
    if (s === null || typeof s !== "object" || !Array.isArray(s.params)) {
      throw new TypeError(`${where}: group ${gi} must have a params array`);
    }
    const lr = s.lr ?? defaults.lr;
    const weightDecay = s.weightDecay ?? defaults.weightDecay;
    checkNonNegative(where, `lr of group ${gi}`, lr);
    checkNonNegative(where, `weightDecay of group ${gi}`, weightDecay);
    for (const p of s.params) {
      if (p === null || typeof p !== "object" || !p.value || !p.grad) {
        throw new TypeError(`${where}: group ${gi} holds something that is not a Parameter`);
      }
      if (seen.has(p.value)) {
        throw new RangeError(`${where}: parameter ${p.name} appears in more than one group`);
      }
      seen.add(p.value);
    }
    return { params: [...s.params], lr, weightDecay };
  });
}

/** Zeroes the gradients of every group. */
export function zeroGroups(groups: readonly ParamGroup[]): void {
  for (const g of groups) for (const p of g.params) ops.fillInPlace(p.grad, 0);
}
