/**
 * Stochastic gradient descent with momentum.
 *
 * @module
 */

import { checkLayerOptions } from "./_util.ts";
import type { Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import type { Parameter } from "./layer.ts";
import { checkFraction, type ParamGroup, type ParamGroupSpec } from "./optimizer.ts";
import { OptimizerBase } from "./optimizer_base.ts";
import type { LrScheduleSpec } from "./lr_schedule.ts";

/** Options of {@linkcode SGD} (as PyTorch's `SGD` without dampening or Nesterov). */
export interface SGDOptions {
  /** Learning rate of groups that set none (default 1e-2). */
  readonly lr?: number;
  /** Momentum μ in [0, 1) (default 0: plain SGD). */
  readonly momentum?: number;
  /** L2 weight decay λ of groups that set none, added to the gradient (default 0). */
  readonly weightDecay?: number;
  /**
   * Learning-rate schedule over the groups' lr (see `lrAt`); absent: the
   * groups' lr as they stand.
   */
  readonly lrSchedule?: LrScheduleSpec;
}

/**
 * SGD with momentum, as PyTorch: `d = g + λ p`; with momentum
 * `buf ← μ buf + d` (`buf = d` at the first step) and `d = buf`; then
 * `p ← p − lr d`. Its state slot is `momentum_buffer` (none without
 * momentum).
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { SGD } from "@conveyor/core/nn";
 * const be = new CpuBackend();
 * const model = new Linear(be, 3, 1, { seed: 0 });
 * const opt = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
 * opt.step();
 * opt.zeroGrad();
 * console.log(opt.stateSlots); // [ "momentum_buffer" ]
 * opt.dispose();
 * model.dispose();
 * ```
 */
export class SGD extends OptimizerBase {
  /** Selects SGD in specs and checkpoints. */
  readonly kind: "sgd" = "sgd";
  /** Momentum μ. */
  readonly momentum: number;

  /** Creates the optimizer; momentum buffers are allocated at the first step. */
  constructor(params: readonly Parameter[] | readonly ParamGroupSpec[], opts?: SGDOptions) {
    checkLayerOptions("SGD", opts, ["lr", "momentum", "weightDecay", "lrSchedule"]);
    const momentum = opts?.momentum ?? 0;
    checkFraction("SGD", "momentum", momentum);
    super("SGD", params, {
      lr: opts?.lr ?? 1e-2,
      weightDecay: opts?.weightDecay ?? 0,
      ...(opts?.lrSchedule === undefined ? {} : { lrSchedule: opts.lrSchedule }),
    }, momentum === 0 ? [] : ["momentum_buffer"]);
    this.momentum = momentum;
  }

  /** The hyper-parameters of its spec beyond lr and weight decay. */
  protected hyperParameters(): Record<string, number> {
    return { momentum: this.momentum };
  }

  /** One parameter's fused update. */
  protected update(p: Parameter, slots: readonly Tensor[], g: ParamGroup): void {
    // One fused pass; the buffer is updated in place, never reallocated.
    const hp = { lr: g.lr, momentum: this.momentum, weightDecay: g.weightDecay };
    ops.sgdInPlace(p.value, p.grad, slots[0] ?? null, hp);
  }

  /** Names its momentum in state errors. */
  protected override describeState(): string {
    return `SGD with momentum ${this.momentum}`;
  }
}
