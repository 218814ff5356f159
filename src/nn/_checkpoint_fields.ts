// The metadata fields of a training checkpoint: errors beginning
// `checkpoint:`, the `data` object, JSON fields and the step counts, which
// must agree. Used by training_checkpoint.ts; not exported from the package.

/** Throws a RangeError (or a TypeError) beginning `checkpoint:`. */
export function fail(message: string, type: "range" | "type" = "range"): never {
  const text = `checkpoint: ${message}`;
  throw type === "range" ? new RangeError(text) : new TypeError(text);
}

/** `data` as an object of strings (TypeError naming `where` otherwise). */
export function checkData(data: unknown, where: string): Record<string, string> {
  if (data === null || typeof data !== "object" || Array.isArray(data)) {
    fail(`${where} must be an object of strings, got ${JSON.stringify(data)}`, "type");
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(data as Record<string, unknown>)) {
    if (typeof v !== "string") fail(`${where}.${k} must be a string, got ${typeof v}`, "type");
    out[k] = v;
  }
  return out;
}

/** The JSON value of metadata field `key`. */
export function json(meta: Record<string, string>, key: string): unknown {
  try {
    return JSON.parse(meta[key]);
  } catch (e) {
    fail(`__metadata__.${key} is not valid JSON: ${(e as Error).message}`, "type");
  }
}

/** A step count of the metadata: a decimal integer ≥ 0. */
function count(meta: Record<string, string>, key: string): number {
  const v = meta[key];
  if (v === undefined || !/^\d+$/.test(v) || !Number.isSafeInteger(+v)) {
    fail(`__metadata__.${key} must be an integer ≥ 0, got ${JSON.stringify(v)}`);
  }
  return Number(v);
}

/** The step counts of a checkpoint. */
export interface StepCounts {
  readonly step: number;
  readonly optimizerStep: number;
  readonly skippedSteps: number;
}

/**
 * `step`, `optimizer_step` and `skipped_steps` (the last two default to
 * `step` and 0 together: a file written before them), each checked alone.
 */
export function stepCounts(
  meta: Record<string, string>,
): StepCounts {
  const step = count(meta, "step");
  const has = [meta.optimizer_step !== undefined, meta.skipped_steps !== undefined];
  if (!has[0] && !has[1]) return { step, optimizerStep: step, skippedSteps: 0 }; // written before them
  if (!has[0] || !has[1]) {
    fail(
      `__metadata__ has ${has[0] ? "optimizer_step" : "skipped_steps"} but not ` +
        `${has[0] ? "skipped_steps" : "optimizer_step"}: they are written together`,
    );
  }
  return {
    step,
    optimizerStep: count(meta, "optimizer_step"),
    skippedSteps: count(meta, "skipped_steps"),
  };
}

/** Throws unless the steps taken are the optimizer's steps and the skipped ones. */
export function checkStepsAgree({ step, optimizerStep, skippedSteps }: StepCounts): void {
  if (optimizerStep + skippedSteps !== step) {
    fail(
      `__metadata__.step ${step} contradicts the optimizer state: optimizer_step ${optimizerStep} ` +
        `+ skipped_steps ${skippedSteps} = ${optimizerStep + skippedSteps} (the steps taken are ` +
        "the optimizer's steps and the skipped ones)",
    );
  }
}
