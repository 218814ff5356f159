/**
 * The run's policy: what a step with non-finite values does, clipping by
 * the global gradient norm, the watchdog's timeouts and a fault to inject
 * (tests). It is checked once, where it enters (`PipelineParallelModel.create`
 * or a rank group's `create`), and carried unchanged to every rank as one
 * value: a worker, a subprocess host or an MPI process gets it as one field
 * and checks it again on arrival. Its field names are the model's option
 * names.
 *
 * @module
 */

import { checkFaultInjection, type FaultInjection } from "./fault_injection.ts";

/**
 * What a step whose loss or gradients are not finite does: `"skip"` rolls
 * it back on every stage and goes on; `"throw"` rolls it back the same way
 * and ends the run at that step (the model then throws a
 * `NonFiniteStepError`); `"off"` checks nothing.
 */
export type NonFinitePolicy = "skip" | "throw" | "off";

/** The values of {@linkcode NonFinitePolicy}, in the order errors name them. */
const NON_FINITE: readonly NonFinitePolicy[] = ["skip", "throw", "off"];

/** A run's policy, checked by {@linkcode checkRunPolicy} (plain data: it crosses to every rank). */
export interface RunPolicy {
  /** What a step with a non-finite loss or gradient does (see {@linkcode NonFinitePolicy}). */
  readonly nonFinite: NonFinitePolicy;
  /**
   * Clip by the global gradient norm by post-validation (absent: none):
   * each stage steps at once, unclipped; once every stage's sum of squared
   * gradients of an iteration is in, a norm above this limit has every
   * stage redo its step with its gradients times
   * `clipGradNorm / (norm + 1e-6)`, and the next iteration, begun on the
   * unclipped weights, runs again.
   */
  readonly clipGradNorm?: number;
  /** A rank silent this long (ms) is declared hung (ranks in workers; absent: 5000). */
  readonly heartbeatMs?: number;
  /** No action starting on any rank for this long (ms) fails the run (workers; absent: 60 000). */
  readonly stallTimeoutMs?: number;
  /** A fault to inject (tests; see `checkFaultInjection`). */
  readonly faultInjection?: FaultInjection;
}

/** What {@linkcode checkRunPolicy} takes: a {@linkcode RunPolicy} whose `nonFinite` may be absent. */
export type RunPolicyOptions = Partial<RunPolicy>;

/** The field names of a {@linkcode RunPolicy}, each once. */
export const RUN_POLICY_FIELDS: readonly (keyof RunPolicy)[] = [
  "nonFinite",
  "clipGradNorm",
  "heartbeatMs",
  "stallTimeoutMs",
  "faultInjection",
];

function shown(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return `an Array of ${v.length}`;
  if (v !== null && typeof v === "object") return "an object";
  return String(v);
}

function positive(v: unknown, what: string): void {
  if (v !== undefined && (typeof v !== "number" || !(v > 0) || !Number.isFinite(v))) {
    throw new RangeError(`${what} must be a finite number of ms > 0, got ${shown(v)}`);
  }
}

/**
 * Checks a run's policy and returns it with its defaults (`nonFinite`
 * `"off"`), holding only the fields given: TypeError/RangeError naming the
 * field and the value, unknown fields refused. Checking a checked policy
 * again gives an equal one.
 *
 * @example
 * ```ts
 * import { checkRunPolicy } from "@conveyor/core/runtime";
 * console.log(checkRunPolicy({ clipGradNorm: 1 })); // { nonFinite: "off", clipGradNorm: 1 }
 * try {
 *   checkRunPolicy({ nonFinite: "stop" as "skip" });
 * } catch (e) {
 *   console.log((e as Error).message); // 'nonFinite must be "skip", "throw" or "off", got "stop"'
 * }
 * ```
 */
export function checkRunPolicy(policy: RunPolicyOptions | undefined): RunPolicy {
  const p = policy ?? {};
  if (p === null || typeof p !== "object" || Array.isArray(p)) {
    throw new TypeError(
      `policy must be an object { nonFinite, clipGradNorm, ... }, got ${shown(p)}`,
    );
  }
  for (const k of Object.keys(p)) {
    if (!(RUN_POLICY_FIELDS as readonly string[]).includes(k)) {
      throw new TypeError(
        `policy.${k} is not a policy field; known: ${RUN_POLICY_FIELDS.join(", ")}`,
      );
    }
  }
  const nonFinite = p.nonFinite ?? "off";
  if (!NON_FINITE.includes(nonFinite)) {
    throw new TypeError(
      `nonFinite must be "skip", "throw" or "off", got ${JSON.stringify(p.nonFinite)}`,
    );
  }
  const clip = p.clipGradNorm;
  if (
    clip !== undefined && (typeof clip !== "number" || !(clip > 0) || !Number.isFinite(clip))
  ) {
    throw new RangeError(`clipGradNorm must be a finite positive number, got ${shown(clip)}`);
  }
  positive(p.heartbeatMs, "heartbeatMs");
  positive(p.stallTimeoutMs, "stallTimeoutMs");
  if (p.faultInjection !== undefined) checkFaultInjection(p.faultInjection, "faultInjection");
  return {
    nonFinite,
    ...(clip === undefined ? {} : { clipGradNorm: clip }),
    ...(p.heartbeatMs === undefined ? {} : { heartbeatMs: p.heartbeatMs }),
    ...(p.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: p.stallTimeoutMs }),
    ...(p.faultInjection === undefined ? {} : { faultInjection: p.faultInjection }),
  };
}
