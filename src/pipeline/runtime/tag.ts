import { describeValue } from "../../text/describe.ts";
/**
 * The runtime's names for what it keeps apart: the message tags of its
 * traffic between ranks (activations, gradients, step verdicts) and the
 * keys under which an executor keeps a micro-batch's state. This module is
 * the one place that composes them; the transport only sees strings.
 *
 * Tensor tags have one key space for activations and one for gradients,
 * each keyed by iteration, attempt, destination stage and micro-batch, so
 * that two different tensors can never share a tag.
 *
 * @module
 */

/** Which way a tensor flows: activations forward, gradients backward. */
export type TagSpace = "activation" | "gradient";

/** The fields that identify one pipeline tensor in flight. */
export interface TagFields {
  /** Activation (forward) or gradient (backward) traffic. */
  readonly space: TagSpace;
  /** Micro-batch index (non-negative integer). */
  readonly microBatch: number;
  /** Global stage index the tensor is addressed to (non-negative integer). */
  readonly stage: number;
  /** Training iteration (non-negative integer). */
  readonly iteration: number;
  /**
   * Attempt at the iteration (default 0): an iteration replayed after a
   * rolled-back step runs again as attempt 1, 2, …, so its messages never
   * meet the abandoned attempt's.
   */
  readonly attempt?: number;
}

const PREFIX: Readonly<Record<TagSpace, string>> = { activation: "act", gradient: "grad" };

function checkIndex(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${what} must be a non-negative integer, got ${describeValue(value)}`);
  }
  return value;
}

// `i3` for attempt 0, `i3a1` for a replay.
function iterationPart(iteration: number, attempt: number): string {
  return `i${iteration}${attempt === 0 ? "" : `a${attempt}`}`;
}

/**
 * Builds the tag of one pipeline tensor. Activation and gradient tags start
 * with different prefixes (`act/…`, `grad/…`), and the numeric fields are
 * separated, so distinct fields always give distinct tags. A replayed
 * iteration's attempt follows its number (`act/i3a1/…`).
 *
 * @example
 * ```ts
 * import { makeTag } from "@conveyor/core/runtime";
 * console.log(makeTag({ space: "activation", microBatch: 3, stage: 1, iteration: 0 }));
 * // "act/i0/c1/m3"
 * ```
 */
export function makeTag(fields: TagFields): string {
  if (fields === null || typeof fields !== "object") {
    throw new TypeError(`tag fields must be an object { space, microBatch, stage, iteration }`);
  }
  const prefix = Object.hasOwn(PREFIX, fields.space) ? PREFIX[fields.space] : undefined;
  if (prefix === undefined) {
    throw new TypeError(
      `tag space must be "activation" or "gradient", got ${JSON.stringify(fields.space)}`,
    );
  }
  const it = checkIndex(fields.iteration, "iteration");
  const stage = checkIndex(fields.stage, "stage");
  const mb = checkIndex(fields.microBatch, "microBatch");
  const attempt = checkIndex(fields.attempt ?? 0, "attempt");
  return `${prefix}/${iterationPart(it, attempt)}/c${stage}/m${mb}`;
}

/**
 * Whether `tag` is a tensor tag (either space) of `attempt` at `iteration`:
 * what an abandoned attempt's traffic is dropped by.
 *
 * @example
 * ```ts
 * import { isTensorTagOf, makeTag } from "./tag.ts";
 * const tag = makeTag({ space: "gradient", microBatch: 0, stage: 0, iteration: 2, attempt: 1 });
 * console.log(isTensorTagOf(tag, 2, 1), isTensorTagOf(tag, 2, 0)); // true false
 * ```
 */
export function isTensorTagOf(tag: string, iteration: number, attempt: number): boolean {
  const part = `/${iterationPart(iteration, attempt)}/`;
  return Object.values(PREFIX).some((p) => tag.startsWith(p + part));
}

/**
 * The tag of `stage`'s step verdict flag in `iteration` (step
 * post-validation: one message per stage to every other rank).
 *
 * @example
 * ```ts
 * import { verdictTag } from "./tag.ts";
 * console.log(verdictTag(4, 1)); // "verdict/i4/s1"
 * ```
 */
export function verdictTag(iteration: number, stage: number): string {
  return `verdict/i${iteration}/s${stage}`;
}

/**
 * Whether `tag` is a verdict tag of `iteration` (see {@linkcode verdictTag}).
 *
 * @example
 * ```ts
 * import { isVerdictTagOf, verdictTag } from "./tag.ts";
 * console.log(isVerdictTagOf(verdictTag(4, 1), 4), isVerdictTagOf(verdictTag(41, 1), 4)); // true false
 * ```
 */
export function isVerdictTagOf(tag: string, iteration: number): boolean {
  return tag.startsWith(`verdict/i${iteration}/`);
}

/**
 * The key of a micro-batch's state in `iteration` (what an executor keeps
 * for the micro-batch's backward passes).
 *
 * @example
 * ```ts
 * import { stateKey } from "./tag.ts";
 * console.log(stateKey(2, 5)); // "i2m5"
 * ```
 */
export function stateKey(iteration: number, microBatch: number): string {
  return `i${iteration}m${microBatch}`;
}

/**
 * Whether `key` is a state key of `iteration`, or an id that starts with
 * one (see {@linkcode stateKey}): what an abandoned attempt's state is
 * dropped by.
 *
 * @example
 * ```ts
 * import { isStateKeyOf, stateKey } from "./tag.ts";
 * console.log(isStateKeyOf(stateKey(1, 0), 1), isStateKeyOf(stateKey(10, 0), 1)); // true false
 * ```
 */
export function isStateKeyOf(key: string, iteration: number): boolean {
  return key.startsWith(`i${iteration}m`);
}

/**
 * The tag of one bucket of `stage`'s gradients in `iteration` (attempt
 * `attempt`), sent by a replica to the other replicas of the stage for
 * their average (data parallelism). Distinct from the tensor and verdict
 * tags.
 *
 * @example
 * ```ts
 * import { reduceTag } from "./tag.ts";
 * console.log(reduceTag(3, 0, 1, 2)); // "reduce/i3/s1/b2"
 * ```
 */
export function reduceTag(
  iteration: number,
  attempt: number,
  stage: number,
  bucket: number,
): string {
  const it = checkIndex(iteration, "iteration");
  const at = checkIndex(attempt, "attempt");
  return `reduce/${iterationPart(it, at)}/s${checkIndex(stage, "stage")}/b${
    checkIndex(bucket, "bucket")
  }`;
}

/**
 * The tag of a replica's updated share of `stage`'s parameters after its
 * step in `iteration`, sent to the other replicas of the stage (ZeRO-1's
 * all-gather); `redo` for the step redone clipped. A stage steps once per
 * iteration (an attempt is abandoned before its first step) and is redone
 * at most once, so no attempt number is needed. Distinct from every other
 * tag.
 *
 * @example
 * ```ts
 * import { gatherTag } from "./tag.ts";
 * console.log(gatherTag(3, 1, false), gatherTag(3, 1, true)); // gather/i3/s1 gather/i3/s1/redo
 * ```
 */
export function gatherTag(iteration: number, stage: number, redo: boolean): string {
  const it = checkIndex(iteration, "iteration");
  return `gather/i${it}/s${checkIndex(stage, "stage")}${redo ? "/redo" : ""}`;
}

/**
 * The tag of a tied parameter's gradient (`name`, e.g. `"0.token"`) sent
 * by the rank holding its `from` copy (`"owner"`: the embedding; `"head"`:
 * the tied output head) in iteration `iteration`, attempt `attempt`.
 *
 * @example
 * ```ts
 * import { tiedTag } from "./tag.ts";
 * console.log(tiedTag(3, 0, "0.token", "head")); // "tied/i3/0.token/head"
 * ```
 */
export function tiedTag(
  iteration: number,
  attempt: number,
  name: string,
  from: "owner" | "head",
): string {
  const it = checkIndex(iteration, "iteration");
  return `tied/${iterationPart(it, checkIndex(attempt, "attempt"))}/${name}/${from}`;
}
