// Small helpers shared by the layers: argument checks, shape formatting,
// tensor handle juggling.

import { formatShape } from "../text/describe.ts";
import type { Shape, Tensor } from "../tensor/mod.ts";
import { Rng } from "../tensor/random.ts";
import type {
  BackwardOptions,
  ForwardContext,
  ForwardOptions,
  InitOptions,
  StateKey,
} from "./layer.ts";
import { describeValue } from "../text/describe.ts";
import { checkOptionSpelling } from "../text/nearest.ts";

/** Formats a shape for error messages (long ones cut). */
export const fmtShape: (shape: readonly unknown[]) => string = formatShape;

/** A key as the caller wrote it (strings quoted, so 0 and "0" differ). */
export function fmtKey(key: StateKey): string {
  return typeof key === "string" ? JSON.stringify(key) : String(key);
}

/** Throws a TypeError unless `key` is a string or a finite number. */
export function checkKey(where: string, key: unknown): void {
  if (typeof key !== "string" && !(typeof key === "number" && Number.isFinite(key))) {
    throw new TypeError(
      `${where}: key must be a string or a finite number, got ${describeValue(key)}`,
    );
  }
}

/** `opts.needInputGrad` (default true); a TypeError for anything but a boolean. */
export function needInputGrad(where: string, opts: BackwardOptions | undefined): boolean {
  if (opts === undefined) return true;
  if (opts === null || typeof opts !== "object") {
    throw new TypeError(`${where}: backward options must be an object, got ${describeValue(opts)}`);
  }
  const v = opts.needInputGrad;
  if (v === undefined) return true;
  if (typeof v !== "boolean") {
    throw new TypeError(`${where}: needInputGrad must be a boolean, got ${describeValue(v)}`);
  }
  return v;
}

/** Throws a RangeError unless `value` is a positive integer. */
/**
 * Checks a constructor's options object: an object when given (TypeError
 * otherwise), and a misspelt key of `known` gets a did-you-mean.
 */
export function checkLayerOptions(where: string, opts: unknown, known: readonly string[]): void {
  if (opts === undefined) return;
  if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
    throw new TypeError(`${where}: options must be an object, got ${describeValue(opts)}`);
  }
  checkOptionSpelling(opts, known, `${where}: `);
}

export function checkPositiveInt(where: string, what: string, value: number): void {
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
    throw new RangeError(
      `${where}: ${what} must be a positive integer, got ${describeValue(value)}`,
    );
  }
}

/** Throws a RangeError unless `value` is a finite positive number. */
export function checkPositive(where: string, what: string, value: number): void {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new RangeError(
      `${where}: ${what} must be a finite positive number, got ${describeValue(value)}`,
    );
  }
}

/** The generator an initialiser draws from. */
export function initRng(opts: InitOptions | undefined): Rng {
  if (opts?.rng !== undefined) return opts.rng;
  return new Rng(opts?.seed ?? 0);
}

/** A same-storage handle the layer owns, so the caller may dispose theirs. */
export function retain(t: Tensor): Tensor {
  return t.reshape(t.shape);
}

/** Reshapes and gives up the original handle: `t` must not be used afterwards. */
export function moveReshape(t: Tensor, shape: Shape): Tensor {
  const v = t.reshape(shape);
  t.dispose();
  return v;
}

/** Whether two shapes are equal. */
export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Rows of a shape: product of all dimensions but the last. */
export function rowsOf(shape: Shape): number {
  let n = 1;
  for (let i = 0; i < shape.length - 1; i++) n *= shape[i];
  return n;
}

/**
 * The checked training context of forward options: `training` a boolean
 * (default false), `step` an integer in [0, 2^32) when given, `rowOffset`
 * a non-negative integer (default 0).
 */
export function forwardContext(where: string, opts: ForwardOptions | undefined): ForwardContext {
  const training = opts?.training ?? false;
  if (typeof training !== "boolean") {
    throw new TypeError(`${where}: training must be a boolean, got ${describeValue(training)}`);
  }
  const step = opts?.step;
  if (
    step !== undefined &&
    (typeof step !== "number" || !Number.isInteger(step) || step < 0 || step > 0xffffffff)
  ) {
    throw new RangeError(
      `${where}: step must be an integer in [0, 2^32), got ${describeValue(step)}`,
    );
  }
  const rowOffset = opts?.rowOffset ?? 0;
  if (typeof rowOffset !== "number" || !Number.isSafeInteger(rowOffset) || rowOffset < 0) {
    throw new RangeError(
      `${where}: rowOffset must be a non-negative integer, got ${describeValue(rowOffset)}`,
    );
  }
  return { training, step, rowOffset };
}

/** Forward options for a sublayer: the key, `save` and the context, passed on unchanged. */
export function subOptions(key: StateKey, save: boolean, ctx: ForwardContext): ForwardOptions {
  return { key, save, training: ctx.training, step: ctx.step, rowOffset: ctx.rowOffset };
}
