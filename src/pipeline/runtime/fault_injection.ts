/**
 * Fault injection: make a chosen action (or optimizer step) of a chosen
 * iteration fail in a chosen way, on any executor, to test how a run
 * fails and what is left afterwards. The rank's run loop (`runRank`)
 * applies it right before the action's compute (or the step), so every rank
 * group and every executor sees the same faults.
 *
 * The faults, as a user's layer could cause them:
 * - `"throw"`: an Error thrown synchronously;
 * - `"async-throw"`: a promise rejected with nobody to handle it (an
 *   unhandled rejection in the rank's thread), the action then goes on;
 * - `"exit"`: `Deno.exit(3)` in the rank's thread;
 * - `"block"`: `Atomics.wait` on memory nothing ever notifies (the thread
 *   is held and uses no CPU; Deno cannot end such a worker);
 * - `"loop"`: a synchronous loop that never ends (the thread is held and
 *   uses a core; Deno cannot end such a worker either);
 * - `"hang"`: waits on the run's abort flag (a hang the runtime can end);
 * - `"await"`: awaits a promise that never settles (the event loop, and
 *   so the heartbeat, goes on).
 *
 * @module
 */

import { type Action, formatAction, parseAction } from "../schedule/action.ts";
import { describeValue } from "../../text/describe.ts";

/**
 * How an injected fault fails.
 *
 * The faults, as a user's layer could cause them:
 * - `"throw"`: an Error thrown synchronously;
 * - `"async-throw"`: a promise rejected with nobody to handle it (an
 *   unhandled rejection in the rank's thread), the action then goes on;
 * - `"exit"`: `Deno.exit(3)` in the rank's thread;
 * - `"block"`: `Atomics.wait` on memory nothing ever notifies (the thread
 *   is held and uses no CPU; Deno cannot end such a worker);
 * - `"loop"`: a synchronous loop that never ends (the thread is held and
 *   uses a core; Deno cannot end such a worker either);
 * - `"hang"`: waits on the run's abort flag (a hang the runtime can end);
 * - `"await"`: awaits a promise that never settles (the event loop, and
 *   so the heartbeat, goes on).
 */
export type FaultKind = "throw" | "async-throw" | "exit" | "block" | "loop" | "hang" | "await";

const KINDS: readonly FaultKind[] = [
  "throw",
  "async-throw",
  "exit",
  "block",
  "loop",
  "hang",
  "await",
];

/** A fault to inject (see {@linkcode FaultKind} for how each kind fails). */
export interface FaultInjection {
  /**
   * Where: an action in PyTorch's text form (`"2F5"`, `"1I0"`, `"0W3"`,
   * `"1B2"`) or `"step S"`, the optimizer step of stage S.
   */
  readonly at?: string;
  /** What (default `"throw"`). */
  readonly fault?: FaultKind;
  /** Shorthand: `{ at: failAt, fault: "throw" }`. */
  readonly failAt?: string;
  /** Shorthand: `{ at: hangAt, fault: hang === "await" ? "await" : "hang" }`. */
  readonly hangAt?: string;
  /** How `hangAt` hangs: `"block"` (default: `"hang"`, ended by an abort) or `"await"`. */
  readonly hang?: "block" | "await";
  /** Iteration (0-based, counted over the rank group's life) in which it applies (default 0). */
  readonly iteration?: number;
}

/** A checked {@linkcode FaultInjection}: one place, one kind. */
export interface CheckedFault {
  /** The action, or for an optimizer step the stage's last backward is not used: see `stepOf`. */
  readonly action?: Action;
  /** The stage whose optimizer step fails (with `at: "step S"`). */
  readonly stepOf?: number;
  /** How it fails. */
  readonly fault: FaultKind;
  /** The iteration in which it applies. */
  readonly iteration: number;
}

/**
 * Checks a fault spec; `name` is what the caller calls it (named in
 * errors). Unknown fields are refused; exactly one place must be given.
 *
 * @example
 * ```ts
 * import { checkFaultInjection } from "@conveyor/core/testing";
 * console.log(checkFaultInjection({ at: "1F0", fault: "exit" }).fault); // "exit"
 * try {
 *   checkFaultInjection({ failAt: "zzz" });
 * } catch (e) {
 *   console.log((e as Error).message.startsWith("faultInjection.failAt must name")); // true
 * }
 * ```
 */
export function checkFaultInjection(value: unknown, name = "faultInjection"): CheckedFault {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(
      `${name} must be an object { at, fault, iteration } (or { failAt } / { hangAt, hang }), got ${
        value === null ? "null" : Array.isArray(value) ? "an array" : typeof value
      }`,
    );
  }
  const v = value as FaultInjection;
  const known = new Set(["at", "fault", "failAt", "hangAt", "hang", "iteration"]);
  for (const k of Object.keys(v)) {
    if (!known.has(k)) {
      throw new TypeError(`${name}.${k} is not an option; known: ${[...known].join(", ")}`);
    }
  }
  const places = (["at", "failAt", "hangAt"] as const).filter((k) => v[k] !== undefined);
  if (places.length !== 1) {
    throw new TypeError(
      `${name} needs exactly one of at, failAt, hangAt, got ${
        places.length === 0 ? "none" : places.join(" and ")
      }`,
    );
  }
  if (v.hang !== undefined && v.hang !== "block" && v.hang !== "await") {
    throw new TypeError(`${name}.hang must be "block" or "await", got ${JSON.stringify(v.hang)}`);
  }
  if (v.fault !== undefined && !KINDS.includes(v.fault)) {
    throw new TypeError(
      `${name}.fault must be one of ${KINDS.join(", ")}, got ${JSON.stringify(v.fault)}`,
    );
  }
  const iteration = v.iteration ?? 0;
  if (!Number.isSafeInteger(iteration) || iteration < 0) {
    throw new RangeError(
      `${name}.iteration must be a non-negative integer, got ${describeValue(v.iteration)}`,
    );
  }
  const key = places[0];
  const text = v[key];
  const fault: FaultKind = key === "failAt"
    ? "throw"
    : key === "hangAt"
    ? (v.hang === "await" ? "await" : "hang")
    : (v.fault ?? "throw");
  const step = typeof text === "string" ? /^\s*step\s+(\d+)\s*$/.exec(text) : null;
  if (key === "at" && step !== null) return { stepOf: Number(step[1]), fault, iteration };
  try {
    return { action: parseAction(text as string), fault, iteration };
  } catch {
    throw new TypeError(
      `${name}.${key} must name an action as <stage><F|B|I|W><microBatch> (e.g. "1F0")${
        key === "at" ? ' or a step as "step <stage>"' : ""
      }, got ${JSON.stringify(text)}`,
    );
  }
}

const same = (a: Action | undefined, b: Action) =>
  a !== undefined && a.kind === b.kind && a.stage === b.stage && a.microBatch === b.microBatch;

/**
 * Applies `fault` before `action` of `iteration` (or, with `step`, before
 * the optimizer step of `action.stage`): throws, exits, holds the thread,
 * returns a promise that never settles (`"await"`), or (no match)
 * returns undefined. A `"hang"` ends when `abortFlag[0]` turns nonzero.
 */
export function applyFault(
  fault: CheckedFault | undefined,
  action: Action,
  iteration: number,
  abortFlag: Int32Array,
  step = false,
): Promise<never> | undefined {
  if (fault === undefined || fault.iteration !== iteration) return undefined;
  const hit = step ? fault.stepOf === action.stage : same(fault.action, action);
  if (!hit) return undefined;
  const where = step ? `the optimizer step of stage ${action.stage}` : formatAction(action);
  switch (fault.fault) {
    case "throw":
      throw new Error(`injected failure at ${where}`);
    case "async-throw":
      // Nobody awaits it: an unhandled rejection in this thread.
      Promise.reject(new Error(`injected unhandled rejection at ${where}`));
      return undefined;
    case "exit":
      Deno.exit(3);
      break;
    case "block":
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
      break;
    case "loop": {
      let x = 0;
      for (;;) x = (x + 1) % 1e9;
    }
    case "await":
      return new Promise<never>(() => {});
    case "hang":
      Atomics.wait(abortFlag, 0, 0);
  }
  throw new Error(`injected hang at ${where} ended by abort`);
}

// The key under which `withFaultInjection` hides a fault in a model's
// options: not a name `create` lists, so no user's options type shows it.
const FAULT_KEY: unique symbol = Symbol("conveyor fault injection");

/**
 * `options` (a `PipelineParallelModel.create` options object) with `fault`
 * to inject (tests; see {@linkcode checkFaultInjection}): the model's
 * options type has no field for it, so only this function (exported by the
 * `testing` entry point) gives one. The fault is checked by `create`.
 *
 * @example
 * ```ts
 * import { withFaultInjection } from "@conveyor/core/testing";
 * const options = withFaultInjection({ ranks: 2 }, { failAt: "1F0" });
 * console.log(options.ranks, Object.keys(options)); // 2 [ "ranks" ]
 * ```
 */
export function withFaultInjection<T extends object>(options: T, fault: FaultInjection): T {
  return { ...options, [FAULT_KEY]: fault };
}

/** The fault `withFaultInjection` put in `options`, if any (unchecked). */
export function faultInjectionOf(options: object): FaultInjection | undefined {
  return (options as { [FAULT_KEY]?: FaultInjection })[FAULT_KEY];
}
