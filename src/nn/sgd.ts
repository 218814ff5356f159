/**
 * Stochastic gradient descent with momentum.
 *
 * @module
 */

import type { Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { keep } from "../tensor/tidy.ts";
import type { Parameter } from "./layer.ts";
import {
  checkFraction,
  checkGroups,
  makeGroups,
  type Optimizer,
  type ParamGroup,
  type ParamGroupSpec,
  zeroGroups,
} from "./optimizer.ts";

/** Options of {@linkcode SGD} (as PyTorch's `SGD` without dampening or Nesterov). */
export interface SGDOptions {
  /** Learning rate of groups that set none (default 1e-2). */
  readonly lr?: number;
  /** Momentum μ in [0, 1) (default 0: plain SGD). */
  readonly momentum?: number;
  /** L2 weight decay λ of groups that set none, added to the gradient (default 0). */
  readonly weightDecay?: number;
}

/**
 * SGD with momentum, as PyTorch: `d = g + λ p`; with momentum
 * `buf ← μ buf + d` (`buf = d` at the first step) and `d = buf`; then
 * `p ← p − lr d`.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, SGD } from "@conveyor/core";
 * const be = new CpuBackend();
 * const model = new Linear(be, 3, 1, { seed: 0 });
 * const opt = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
 * opt.step();
 * opt.zeroGrad();
 * opt.dispose();
 * model.dispose();
 * ```
 */
export class SGD implements Optimizer {
  readonly groups: readonly ParamGroup[];
  /** Momentum μ. */
  readonly momentum: number;
  #step = 0;
  #buf = new Map<Tensor, Tensor>();

  /** Creates the optimizer; momentum buffers are allocated at the first step. */
  constructor(params: readonly Parameter[] | readonly ParamGroupSpec[], opts?: SGDOptions) {
    const momentum = opts?.momentum ?? 0;
    checkFraction("SGD", "momentum", momentum);
    this.groups = makeGroups("SGD", params, {
      lr: opts?.lr ?? 1e-2,
      weightDecay: opts?.weightDecay ?? 0,
    });
    this.momentum = momentum;
  }

  get stepCount(): number {
    return this.#step;
  }

  step(): void {
    checkGroups("SGD", this.groups);
    this.#step++;
    const momentum = this.momentum;
    for (const g of this.groups) {
      const hp = { lr: g.lr, momentum, weightDecay: g.weightDecay };
      for (const p of g.params) {
        let buf: Tensor | null = null;
        if (momentum !== 0) {
          buf = this.#buf.get(p.value) ?? null;
          if (buf === null) {
            // Zeros make the fused step's μ·buf + d exactly PyTorch's first `buf = d`.
            buf = keep(p.value.backend.zeros(p.value.shape)); // outlives tidy()
            this.#buf.set(p.value, buf);
          }
        }
        // One fused pass; the buffer is updated in place, never reallocated.
        ops.sgdInPlace(p.value, p.grad, buf, hp);
      }
    }
  }

  zeroGrad(): void {
    zeroGroups(this.groups);
  }

  dispose(): void {
    for (const b of this.#buf.values()) b.dispose();
    this.#buf.clear();
  }
}
