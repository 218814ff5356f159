import { didYouMean } from "../text/nearest.ts";
import { describeValue } from "../text/describe.ts";
/**
 * Learning-rate schedules as plain data (`{ kind: "cosine", decaySteps: 1000 }`),
 * so that they cross to pipeline workers and processes inside an optimizer
 * spec, and a formula {@linkcode lrAt} that gives the lr of any step.
 *
 * See {@linkcode lrAt} for the convention and each formula.
 *
 * @module
 */

/** The same lr at every step. */
export interface ConstantLrSpec {
  /** Selects the constant schedule. */
  readonly kind: "constant";
}

/** Linear change of the lr's factor over `steps` steps, then constant (PyTorch's `LinearLR`). */
export interface LinearLrSpec {
  /** Selects the linear schedule (a warmup when startFactor < endFactor). */
  readonly kind: "linear";
  /** T: steps from the start factor to the end factor (positive integer). */
  readonly steps: number;
  /** Factor of the base lr at step 0, in (0, 1] (default 1/3). */
  readonly startFactor?: number;
  /** Factor from step T on, in [0, 1] (default 1). */
  readonly endFactor?: number;
}

/** Cosine decay from the base lr to `minLr` over `decaySteps` steps, then `minLr`. */
export interface CosineLrSpec {
  /** Selects the cosine schedule (PyTorch's `CosineAnnealingLR` until `decaySteps`). */
  readonly kind: "cosine";
  /** T_max: steps of the decay (positive integer). */
  readonly decaySteps: number;
  /** eta_min: the floor (finite, ≥ 0; default 0). */
  readonly minLr?: number;
}

/** Multiplies the lr by `gamma` every `stepSize` steps (PyTorch's `StepLR`). */
export interface StepLrSpec {
  /** Selects step decay. */
  readonly kind: "step";
  /** Steps between decays (positive integer). */
  readonly stepSize: number;
  /** Factor per decay (finite, ≥ 0; default 0.1). */
  readonly gamma?: number;
}

/** Schedules one after another (PyTorch's `SequentialLR`): each restarts at its own step 0. */
export interface SequentialLrSpec {
  /** Selects a composition. */
  readonly kind: "sequential";
  /** The schedules, at least one. */
  readonly schedules: readonly LrScheduleSpec[];
  /** Steps at which the next schedule takes over: strictly increasing positive integers, one fewer than schedules. */
  readonly milestones: readonly number[];
}

/** Linear warmup, then cosine decay: `sequential` of `linear` and `cosine`. */
export interface WarmupCosineLrSpec {
  /** Selects warmup then cosine. */
  readonly kind: "warmup-cosine";
  /** Steps of the linear warmup (integer ≥ 0; 0: cosine alone). */
  readonly warmupSteps: number;
  /** Steps of the cosine after the warmup (positive integer). */
  readonly decaySteps: number;
  /** The cosine's floor (default 0). */
  readonly minLr?: number;
  /** The warmup's factor at step 0, in (0, 1] (default 1/3, as `LinearLR`). */
  readonly startFactor?: number;
}

/** A learning-rate schedule as plain data. */
export type LrScheduleSpec =
  | ConstantLrSpec
  | LinearLrSpec
  | CosineLrSpec
  | StepLrSpec
  | SequentialLrSpec
  | WarmupCosineLrSpec;

/** The schedule kinds. */
export const LR_SCHEDULE_KINDS: readonly LrScheduleSpec["kind"][] = [
  "constant",
  "linear",
  "cosine",
  "step",
  "sequential",
  "warmup-cosine",
];

const KEYS: Readonly<Record<LrScheduleSpec["kind"], readonly string[]>> = {
  "constant": ["kind"],
  "linear": ["kind", "steps", "startFactor", "endFactor"],
  "cosine": ["kind", "decaySteps", "minLr"],
  "step": ["kind", "stepSize", "gamma"],
  "sequential": ["kind", "schedules", "milestones"],
  "warmup-cosine": ["kind", "warmupSteps", "decaySteps", "minLr", "startFactor"],
};

function positiveInt(where: string, what: string, v: unknown): void {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
    throw new RangeError(`${where}.${what} must be a positive integer, got ${describeValue(v)}`);
  }
}

function nonNegative(where: string, what: string, v: unknown): void {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new RangeError(`${where}.${what} must be a finite number ≥ 0, got ${describeValue(v)}`);
  }
}

function startFactor(where: string, v: unknown): void {
  if (v !== undefined && (typeof v !== "number" || !(v > 0 && v <= 1))) {
    throw new RangeError(`${where}.startFactor must lie in (0, 1], got ${describeValue(v)}`);
  }
}

/**
 * Checks a schedule spec (TypeError for a wrong kind or an unknown key,
 * RangeError naming a bad value and its rule; `where` names it) and returns
 * a plain copy.
 *
 * @example
 * ```ts
 * import { checkLrSchedule } from "@conveyor/core/nn";
 * console.log(checkLrSchedule({ kind: "cosine", decaySteps: 100 })); // { kind: "cosine", decaySteps: 100 }
 * ```
 */
export function checkLrSchedule(spec: LrScheduleSpec, where = "lrSchedule"): LrScheduleSpec {
  if (spec === null || typeof spec !== "object" || Array.isArray(spec)) {
    throw new TypeError(
      `${where} must be an object { kind: ${
        LR_SCHEDULE_KINDS.map((k) => JSON.stringify(k)).join(" | ")
      }, ... }, got ${typeof spec === "function" ? "a function" : String(spec)}`,
    );
  }
  const keys = KEYS[spec.kind as LrScheduleSpec["kind"]];
  if (keys === undefined || !Object.hasOwn(KEYS, spec.kind)) {
    throw new TypeError(
      `${where}.kind must be one of ${LR_SCHEDULE_KINDS.join(", ")}, got ${
        JSON.stringify(spec.kind) ?? "undefined"
      }`,
    );
  }
  for (const k of Object.keys(spec)) {
    if (!keys.includes(k)) {
      throw new TypeError(
        `unknown ${spec.kind} schedule option ${JSON.stringify(k)} in ${where}${
          didYouMean(k, keys)
        }; known: ${keys.slice(1).join(", ") || "none"}`,
      );
    }
  }
  switch (spec.kind) {
    case "constant":
      return { kind: "constant" };
    case "linear": {
      positiveInt(where, "steps", spec.steps);
      startFactor(where, spec.startFactor);
      const e = spec.endFactor;
      if (e !== undefined && (typeof e !== "number" || !(e >= 0 && e <= 1))) {
        throw new RangeError(`${where}.endFactor must lie in [0, 1], got ${describeValue(e)}`);
      }
      return { ...spec };
    }
    case "cosine":
      positiveInt(where, "decaySteps", spec.decaySteps);
      if (spec.minLr !== undefined) nonNegative(where, "minLr", spec.minLr);
      return { ...spec };
    case "step":
      positiveInt(where, "stepSize", spec.stepSize);
      if (spec.gamma !== undefined) nonNegative(where, "gamma", spec.gamma);
      return { ...spec };
    case "warmup-cosine":
      if (
        typeof spec.warmupSteps !== "number" || !Number.isSafeInteger(spec.warmupSteps) ||
        spec.warmupSteps < 0
      ) {
        throw new RangeError(
          `${where}.warmupSteps must be an integer ≥ 0, got ${describeValue(spec.warmupSteps)}`,
        );
      }
      positiveInt(where, "decaySteps", spec.decaySteps);
      if (spec.minLr !== undefined) nonNegative(where, "minLr", spec.minLr);
      startFactor(where, spec.startFactor);
      return { ...spec };
    case "sequential": {
      const { schedules, milestones } = spec;
      if (!Array.isArray(schedules) || schedules.length === 0) {
        throw new TypeError(`${where}.schedules must be a non-empty array of schedules`);
      }
      if (!Array.isArray(milestones) || milestones.length !== schedules.length - 1) {
        throw new RangeError(
          `${where}.milestones must hold ${
            schedules.length - 1
          } step(s), one fewer than the ${schedules.length} schedules, got ${
            JSON.stringify(milestones)
          }`,
        );
      }
      milestones.forEach((m, i) => {
        positiveInt(where, `milestones[${i}]`, m);
        if (i > 0 && m <= milestones[i - 1]) {
          throw new RangeError(
            `${where}.milestones must increase strictly, got ${JSON.stringify(milestones)}`,
          );
        }
      });
      return {
        kind: "sequential",
        schedules: schedules.map((s, i) => checkLrSchedule(s, `${where}.schedules[${i}]`)),
        milestones: [...milestones],
      };
    }
  }
}

// The formulas; `s` is checked.
function at(s: LrScheduleSpec, base: number, t: number): number {
  switch (s.kind) {
    case "constant":
      return base;
    case "linear": {
      const a = s.startFactor ?? 1 / 3, e = s.endFactor ?? 1;
      return base * (a + (e - a) * Math.min(t, s.steps) / s.steps);
    }
    case "cosine": {
      const min = s.minLr ?? 0;
      if (t >= s.decaySteps) return min;
      return min + (base - min) * (1 + Math.cos(Math.PI * t / s.decaySteps)) / 2;
    }
    case "step":
      return base * (s.gamma ?? 0.1) ** Math.floor(t / s.stepSize);
    case "sequential": {
      let i = 0;
      while (i < s.milestones.length && s.milestones[i] <= t) i++;
      return at(s.schedules[i], base, i === 0 ? t : t - s.milestones[i - 1]);
    }
    case "warmup-cosine": {
      const cosine: CosineLrSpec = {
        kind: "cosine",
        decaySteps: s.decaySteps,
        ...(s.minLr === undefined ? {} : { minLr: s.minLr }),
      };
      if (s.warmupSteps === 0) return at(cosine, base, t);
      const warmup: LinearLrSpec = {
        kind: "linear",
        steps: s.warmupSteps,
        endFactor: 1,
        ...(s.startFactor === undefined ? {} : { startFactor: s.startFactor }),
      };
      return at(
        { kind: "sequential", schedules: [warmup, cosine], milestones: [s.warmupSteps] },
        base,
        t,
      );
    }
  }
}

/**
 * The learning rate of the step with 0-based index `step` (the number of
 * optimizer steps already taken) under `schedule` with base lr `baseLr`.
 *
 * **Convention (PyTorch's).** `t` is the number of optimizer steps already
 * taken: the first step runs with `lrAt(s, base, 0)`, the (t + 1)-th with
 * `lrAt(s, base, t)`. That is the lr a PyTorch optimizer holds when a
 * scheduler is created before training and `scheduler.step()` follows every
 * `optimizer.step()`; so step 0 of a warmup already runs at
 * `base · startFactor`, never at 0. Each formula is the closed form of the
 * PyTorch scheduler named beside it:
 *
 * | kind            | lr at step t                                                          | PyTorch                      |
 * | --------------- | --------------------------------------------------------------------- | ---------------------------- |
 * | `constant`      | `base`                                                                | —                            |
 * | `linear`        | `base · (s + (e − s) · min(t, T) / T)`, s = startFactor, e = endFactor, T = steps | `LinearLR`       |
 * | `cosine`        | `min + (base − min) · (1 + cos(π t / T)) / 2` for t ≤ T, then `min`     | `CosineAnnealingLR`          |
 * | `step`          | `base · γ^⌊t / stepSize⌋`                                             | `StepLR`                     |
 * | `sequential`    | schedule i at `t − milestones[i − 1]`, i = number of milestones ≤ t     | `SequentialLR`               |
 * | `warmup-cosine` | `sequential` of `linear` (startFactor → 1 over warmupSteps) and `cosine` (decaySteps) at milestone warmupSteps | `SequentialLR` |
 *
 * One deliberate difference: past `decaySteps` the cosine stays at its
 * floor `minLr`, where `CosineAnnealingLR` would climb back up (its cosine
 * is periodic). Defaults are PyTorch's: `startFactor` 1/3, `endFactor` 1,
 * `gamma` 0.1, `minLr` 0.
 *
 * @example
 * ```ts
 * import { lrAt } from "@conveyor/core";
 * const s = { kind: "warmup-cosine", warmupSteps: 2, decaySteps: 4, startFactor: 0.5 } as const;
 * console.log([0, 1, 2, 3, 4, 5, 6].map((t) => lrAt(s, 0.1, t).toFixed(4)).join(" "));
 * // "0.0500 0.0750 0.1000 0.0854 0.0500 0.0146 0.0000"
 * ```
 */
export function lrAt(schedule: LrScheduleSpec, baseLr: number, step: number): number {
  const s = checkLrSchedule(schedule);
  if (typeof baseLr !== "number" || !Number.isFinite(baseLr) || baseLr < 0) {
    throw new RangeError(`lrAt: baseLr must be a finite number ≥ 0, got ${describeValue(baseLr)}`);
  }
  if (!Number.isSafeInteger(step) || step < 0) {
    throw new RangeError(`lrAt: step must be an integer ≥ 0, got ${describeValue(step)}`);
  }
  return at(s, baseLr, step);
}

/**
 * `lrAt` without the checks, for an optimizer's hot path: `schedule` must
 * have passed {@linkcode checkLrSchedule}.
 */
export function lrAtChecked(schedule: LrScheduleSpec, baseLr: number, step: number): number {
  return at(schedule, baseLr, step);
}
