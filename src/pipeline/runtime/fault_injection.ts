/**
 * Fault injection: make a chosen action of a chosen iteration throw or
 * hang, on any executor, to test how a run fails. The rank's run loop
 * (`runRank`) applies it right before the action's compute, so every rank
 * group and every executor sees the same faults.
 *
 * @module
 */

import { type Action, formatAction, parseAction } from "../schedule/action.ts";

/** A fault to inject (see the module documentation). */
export interface FaultInjection {
  /** Throw an Error when this action starts (PyTorch's text form, e.g. `"2F5"`). */
  readonly failAt?: string;
  /** Hang when this action starts. */
  readonly hangAt?: string;
  /**
   * How to hang: `"block"` (default) holds the rank's thread (Atomics.wait on
   * the run's abort flag, so an abort frees it): no heartbeats, the
   * heartbeat timeout catches it; `"await"` waits on a promise that never
   * settles: heartbeats go on, the stall timeout catches it.
   */
  readonly hang?: "block" | "await";
  /** Iteration (0-based, counted over the rank group's life) in which they apply (default 0). */
  readonly iteration?: number;
}

/** A checked {@linkcode FaultInjection}. */
export interface CheckedFault {
  /** The action that throws. */
  readonly failAt?: Action;
  /** The action that hangs. */
  readonly hangAt?: Action;
  /** How it hangs. */
  readonly hang: "block" | "await";
  /** The iteration in which they apply. */
  readonly iteration: number;
}

function checkAction(value: unknown, name: string): Action | undefined {
  if (value === undefined) return undefined;
  try {
    return parseAction(value as string);
  } catch {
    throw new TypeError(
      `${name} must name an action as <stage><F|B|I|W><microBatch> (e.g. "1F0"), got ${
        JSON.stringify(value)
      }`,
    );
  }
}

/**
 * Checks a fault spec; `name` is what the caller calls it (named in
 * errors). Unknown fields are refused.
 *
 * @example
 * ```ts
 * import { checkFaultInjection } from "@conveyor/core/testing";
 * console.log(checkFaultInjection({ failAt: "1F0" }).failAt); // { kind: "F", stage: 1, microBatch: 0 }
 * try {
 *   checkFaultInjection({ failAt: "zzz" });
 * } catch (e) {
 *   console.log((e as Error).message.startsWith("faultInjection.failAt must name an action")); // true
 * }
 * ```
 */
export function checkFaultInjection(value: unknown, name = "faultInjection"): CheckedFault {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(
      `${name} must be an object { failAt, hangAt, hang, iteration }, got ${String(value)}`,
    );
  }
  const v = value as FaultInjection;
  const known = new Set(["failAt", "hangAt", "hang", "iteration"]);
  for (const k of Object.keys(v)) {
    if (!known.has(k)) {
      throw new TypeError(
        `${name}.${k} is not an option; known: ${[...known].join(", ")}`,
      );
    }
  }
  if (v.hang !== undefined && v.hang !== "block" && v.hang !== "await") {
    throw new TypeError(`${name}.hang must be "block" or "await", got ${JSON.stringify(v.hang)}`);
  }
  const iteration = v.iteration ?? 0;
  if (!Number.isSafeInteger(iteration) || iteration < 0) {
    throw new RangeError(`${name}.iteration must be a non-negative integer, got ${v.iteration}`);
  }
  const failAt = checkAction(v.failAt, `${name}.failAt`);
  const hangAt = checkAction(v.hangAt, `${name}.hangAt`);
  return {
    ...(failAt === undefined ? {} : { failAt }),
    ...(hangAt === undefined ? {} : { hangAt }),
    hang: v.hang ?? "block",
    iteration,
  };
}

const same = (a: Action | undefined, b: Action) =>
  a !== undefined && a.kind === b.kind && a.stage === b.stage && a.microBatch === b.microBatch;

/**
 * Applies `fault` to `action` of `iteration`: throws, hangs, or (no match)
 * returns undefined. A "block" hang ends when `abortFlag[0]` turns nonzero
 * (then it throws); an "await" hang returns a promise that never settles.
 */
export function applyFault(
  fault: CheckedFault | undefined,
  action: Action,
  iteration: number,
  abortFlag: Int32Array,
): Promise<never> | undefined {
  if (fault === undefined || fault.iteration !== iteration) return undefined;
  const text = formatAction(action);
  if (same(fault.failAt, action)) throw new Error(`injected failure at ${text}`);
  if (!same(fault.hangAt, action)) return undefined;
  if (fault.hang === "await") return new Promise<never>(() => {});
  Atomics.wait(abortFlag, 0, 0);
  throw new Error(`injected hang at ${text} ended by abort`);
}
