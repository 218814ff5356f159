/**
 * Optimizers as data: `{ kind: "adamw" | "sgd", ...hyper-parameters,
 * lrSchedule? }`, so that every pipeline worker can build its stage's
 * optimizer from the same structured-cloneable description. The learning
 * rate is a number; a schedule is data too (`lrSchedule`, see `lrAt`),
 * because functions cannot cross to workers.
 *
 * @module
 */

import { didYouMean } from "../text/nearest.ts";
import { AdamW, type AdamWOptions } from "./adamw.ts";
import type { Parameter } from "./layer.ts";
import type { OptimizerBase } from "./optimizer_base.ts";
import { SGD, type SGDOptions } from "./sgd.ts";
import { describeValue } from "../text/describe.ts";

/** AdamW with its options (defaults as {@linkcode AdamW}). */
export interface AdamWSpec extends AdamWOptions {
  /** Selects AdamW. */
  readonly kind: "adamw";
}

/** SGD with momentum with its options (defaults as {@linkcode SGD}). */
export interface SGDSpec extends SGDOptions {
  /** Selects SGD. */
  readonly kind: "sgd";
}

/** An optimizer and its hyper-parameters, as plain data. */
export type OptimizerSpec = AdamWSpec | SGDSpec;

const KEYS: Readonly<Record<OptimizerSpec["kind"], readonly string[]>> = {
  adamw: ["kind", "lr", "beta1", "beta2", "eps", "weightDecay", "lrSchedule"],
  sgd: ["kind", "lr", "momentum", "weightDecay", "lrSchedule"],
};

/**
 * Checks an optimizer spec before any work: the kind (TypeError listing the
 * kinds), unknown keys (TypeError naming them), and every value, by the
 * optimizer's own rules (RangeError naming the value). Returns a plain copy.
 *
 * @example
 * ```ts
 * import { checkOptimizerSpec } from "@conveyor/core/nn";
 * console.log(checkOptimizerSpec({ kind: "sgd", lr: 0.1 })); // { kind: "sgd", lr: 0.1 }
 * ```
 */
export function checkOptimizerSpec(spec: OptimizerSpec): OptimizerSpec {
  if (spec === null || typeof spec !== "object") {
    throw new TypeError(
      `optimizer must be an object { kind: "adamw" | "sgd", ... }, got ${describeValue(spec)}`,
    );
  }
  const keys = KEYS[spec.kind as OptimizerSpec["kind"]];
  if (keys === undefined) {
    throw new TypeError(
      `optimizer.kind must be "adamw" or "sgd", got ${JSON.stringify(spec.kind) ?? "undefined"}`,
    );
  }
  for (const k of Object.keys(spec)) {
    if (!keys.includes(k)) {
      throw new TypeError(
        `unknown ${spec.kind} option ${JSON.stringify(k)}${didYouMean(k, keys)}; known: ${
          keys.slice(1).join(", ")
        }`,
      );
    }
  }
  if (typeof (spec as { lr?: unknown }).lr === "function") {
    throw new TypeError(
      "optimizer.lr must be a number, got a function: a function cannot cross to the " +
        "pipeline's workers; give a schedule as data in optimizer.lrSchedule " +
        '(e.g. { kind: "warmup-cosine", warmupSteps, decaySteps }) or call ' +
        "model.setLearningRate(lr) before each step",
    );
  }
  // The constructors validate every hyper-parameter; an empty parameter list builds nothing.
  const probe = createOptimizer(spec, []);
  probe.dispose();
  return {
    ...spec,
    ...(probe.lrSchedule === null ? {} : { lrSchedule: probe.lrSchedule }),
  } as OptimizerSpec;
}

/**
 * The names of the per-parameter state tensors an optimizer of `spec`
 * keeps, as in PyTorch's state dict: AdamW `exp_avg`, `exp_avg_sq`; SGD
 * with momentum `momentum_buffer`; SGD without momentum none.
 *
 * @example
 * ```ts
 * import { optimizerStateSlots } from "./optimizer_spec.ts";
 * console.log(optimizerStateSlots({ kind: "adamw" })); // [ "exp_avg", "exp_avg_sq" ]
 * console.log(optimizerStateSlots({ kind: "sgd", lr: 0.1 })); // []
 * ```
 */
export function optimizerStateSlots(spec: OptimizerSpec): readonly string[] {
  const probe = createOptimizer(spec, []);
  probe.dispose();
  return probe.stateSlots;
}

/**
 * Builds the optimizer `spec` describes over `params`.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { createOptimizer } from "@conveyor/core/nn";
 * const lin = new Linear(new CpuBackend(), 2, 2);
 * const opt = createOptimizer({ kind: "adamw", lr: 1e-3, weightDecay: 0 }, lin.parameters());
 * opt.step();
 * console.log(opt.stepCount); // 1
 * opt.dispose();
 * lin.dispose();
 * ```
 */
export function createOptimizer(
  spec: OptimizerSpec,
  params: readonly Parameter[],
): OptimizerBase {
  switch (spec?.kind) {
    case "adamw": {
      const { kind: _, ...o } = spec;
      return new AdamW(params, o);
    }
    case "sgd": {
      const { kind: _, ...o } = spec;
      return new SGD(params, o);
    }
    default:
      throw new TypeError(
        `optimizer.kind must be "adamw" or "sgd", got ${
          JSON.stringify((spec as { kind?: unknown })?.kind) ?? "undefined"
        }`,
      );
  }
}
