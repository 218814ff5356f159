/**
 * AdamW: Adam with decoupled weight decay (Loshchilov & Hutter).
 *
 * @module
 */

import { checkLayerOptions } from "./_util.ts";
import type { Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import type { Parameter } from "./layer.ts";
import {
  checkFraction,
  checkNonNegative,
  type ParamGroup,
  type ParamGroupSpec,
} from "./optimizer.ts";
import { OptimizerBase } from "./optimizer_base.ts";
import type { LrScheduleSpec } from "./lr_schedule.ts";

/** Options of {@linkcode AdamW} (defaults as PyTorch's `AdamW`). */
export interface AdamWOptions {
  /** Learning rate of groups that set none (default 1e-3). */
  readonly lr?: number;
  /** First-moment decay (default 0.9). */
  readonly beta1?: number;
  /** Second-moment decay (default 0.999). */
  readonly beta2?: number;
  /** Denominator epsilon (default 1e-8). */
  readonly eps?: number;
  /** Decoupled weight decay of groups that set none (default 0.01). */
  readonly weightDecay?: number;
  /**
   * Learning-rate schedule over the groups' lr (see `lrAt`); absent: the
   * groups' lr as they stand.
   */
  readonly lrSchedule?: LrScheduleSpec;
}

/**
 * AdamW over parameter groups, one fused `adamwInPlace` kernel per parameter:
 * `m ← β1 m + (1−β1) g`, `v ← β2 v + (1−β2) g²`,
 * `p ← p − lr (m̂ / (√v̂ + ε) + λ p)` with bias-corrected m̂, v̂. Its state
 * slots are `exp_avg` (m) and `exp_avg_sq` (v).
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { AdamW } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const model = new Linear(be, 4, 4, { seed: 0 });
 * const [weight, bias] = model.parameters();
 * const opt = new AdamW([
 *   { params: [weight], weightDecay: 0.1 },
 *   { params: [bias], weightDecay: 0 },
 * ], { lr: 3e-3 });
 * opt.step();
 * console.log(opt.stepCount); // 1
 * opt.dispose();
 * model.dispose();
 * ```
 */
export class AdamW extends OptimizerBase {
  /** Selects AdamW in specs and checkpoints. */
  readonly kind: "adamw" = "adamw";
  /** First-moment decay. */
  readonly beta1: number;
  /** Second-moment decay. */
  readonly beta2: number;
  /** Denominator epsilon. */
  readonly eps: number;

  /** Creates the optimizer; moments are allocated at the first step. */
  constructor(params: readonly Parameter[] | readonly ParamGroupSpec[], opts?: AdamWOptions) {
    checkLayerOptions("AdamW", opts, ["lr", "beta1", "beta2", "eps", "weightDecay", "lrSchedule"]);
    const beta1 = opts?.beta1 ?? 0.9, beta2 = opts?.beta2 ?? 0.999, eps = opts?.eps ?? 1e-8;
    checkFraction("AdamW", "beta1", beta1);
    checkFraction("AdamW", "beta2", beta2);
    checkNonNegative("AdamW", "eps", eps);
    if (eps === 0) throw new RangeError("AdamW: eps must be positive, got 0");
    super("AdamW", params, {
      lr: opts?.lr ?? 1e-3,
      weightDecay: opts?.weightDecay ?? 0.01,
      ...(opts?.lrSchedule === undefined ? {} : { lrSchedule: opts.lrSchedule }),
    }, ["exp_avg", "exp_avg_sq"]);
    this.beta1 = beta1;
    this.beta2 = beta2;
    this.eps = eps;
  }

  /** The hyper-parameters of its spec beyond lr and weight decay. */
  protected hyperParameters(): Record<string, number> {
    return { beta1: this.beta1, beta2: this.beta2, eps: this.eps };
  }

  /** One parameter's fused update. */
  protected update(p: Parameter, slots: readonly Tensor[], g: ParamGroup, step: number): void {
    ops.adamwInPlace(p.value, p.grad, slots[0], slots[1], {
      lr: g.lr,
      beta1: this.beta1,
      beta2: this.beta2,
      eps: this.eps,
      weightDecay: g.weightDecay,
      step,
    });
  }
}
