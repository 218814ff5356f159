// The learning-rate schedule flags of `train` (`--lr-schedule`,
// `--warmup-steps`, `--decay-steps`, `--min-lr`, `--lr-gamma`), read and
// checked in one place. Not exported from the package.

import type { LrScheduleSpec } from "../nn/lr_schedule.ts";
import { UsageError } from "./command.ts";
import { nonNegative, positiveInt } from "./_options.ts";

/** The lr schedule the `--lr-schedule` flags describe (undefined: constant, no warmup). */
export function readLrSchedule(
  values: Record<string, unknown>,
  lastStep: number,
): LrScheduleSpec | undefined {
  const kind = values["lr-schedule"] ?? "constant";
  if (kind !== "constant" && kind !== "warmup-cosine" && kind !== "step") {
    throw new UsageError(
      `--lr-schedule must be constant, warmup-cosine or step, got ${JSON.stringify(kind)}`,
    );
  }
  const warmup = values["warmup-steps"] === undefined ? 0 : nonNegativeInt(values, "warmup-steps");
  const decay = positiveInt(values, "decay-steps", false);
  const minLr = nonNegative(values, "min-lr");
  const gamma = nonNegative(values, "lr-gamma");
  const only = (flag: string, given: unknown, schedule: string) => {
    if (given !== undefined && kind !== schedule) {
      throw new UsageError(`--${flag} applies to --lr-schedule ${schedule} only, not ${kind}`);
    }
  };
  only("min-lr", minLr, "warmup-cosine");
  only("lr-gamma", gamma, "step");
  if (decay !== undefined && kind === "constant") {
    throw new UsageError(
      "--decay-steps applies to --lr-schedule warmup-cosine or step, not constant",
    );
  }
  const warm: LrScheduleSpec = { kind: "linear", steps: Math.max(1, warmup) };
  if (kind === "constant") return warmup === 0 ? undefined : warm;
  if (kind === "warmup-cosine") {
    const decaySteps = decay ?? Math.max(1, lastStep - warmup);
    return {
      kind: "warmup-cosine",
      warmupSteps: warmup,
      decaySteps,
      ...(minLr === undefined ? {} : { minLr }),
    };
  }
  if (decay === undefined) {
    throw new UsageError("--lr-schedule step needs --decay-steps N (steps between decays)");
  }
  const step: LrScheduleSpec = {
    kind: "step",
    stepSize: decay,
    ...(gamma === undefined ? {} : { gamma }),
  };
  return warmup === 0
    ? step
    : { kind: "sequential", schedules: [warm, step], milestones: [warmup] };
}

function nonNegativeInt(values: Record<string, unknown>, flag: string): number {
  const v = String(values[flag]).trim();
  const n = Number(v);
  if (!/^\+?\d+$/.test(v) || !Number.isSafeInteger(n)) {
    throw new UsageError(`--${flag} must be an integer >= 0, got ${JSON.stringify(values[flag])}`);
  }
  return n;
}
