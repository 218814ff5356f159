/**
 * AdamW: Adam with decoupled weight decay (Loshchilov & Hutter).
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
  checkNonNegative,
  makeGroups,
  type Optimizer,
  type ParamGroup,
  type ParamGroupSpec,
  zeroGroups,
} from "./optimizer.ts";

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
}

/**
 * AdamW over parameter groups, one fused `adamwInPlace` kernel per parameter:
 * `m ← β1 m + (1−β1) g`, `v ← β2 v + (1−β2) g²`,
 * `p ← p − lr (m̂ / (√v̂ + ε) + λ p)` with bias-corrected m̂, v̂.
 *
 * @example
 * ```ts
 * import { AdamW, CpuBackend, Linear } from "@conveyor/core";
 * const be = new CpuBackend();
 * const model = new Linear(be, 4, 4, { seed: 0 });
 * const [weight, bias] = model.parameters();
 * const opt = new AdamW([
 *   { params: [weight], weightDecay: 0.1 },
 *   { params: [bias], weightDecay: 0 },
 * ], { lr: 3e-3 });
 * opt.step();
 * opt.dispose();
 * model.dispose();
 * ```
 */
export class AdamW implements Optimizer {
  readonly groups: readonly ParamGroup[];
  /** First-moment decay. */
  readonly beta1: number;
  /** Second-moment decay. */
  readonly beta2: number;
  /** Denominator epsilon. */
  readonly eps: number;
  #step = 0;
  #state = new Map<Tensor, { m: Tensor; v: Tensor }>();

  /** Creates the optimizer; moments are allocated at the first step. */
  constructor(params: readonly Parameter[] | readonly ParamGroupSpec[], opts?: AdamWOptions) {
    const beta1 = opts?.beta1 ?? 0.9, beta2 = opts?.beta2 ?? 0.999, eps = opts?.eps ?? 1e-8;
    checkFraction("AdamW", "beta1", beta1);
    checkFraction("AdamW", "beta2", beta2);
    checkNonNegative("AdamW", "eps", eps);
    if (eps === 0) throw new RangeError("AdamW: eps must be positive, got 0");
    this.groups = makeGroups("AdamW", params, {
      lr: opts?.lr ?? 1e-3,
      weightDecay: opts?.weightDecay ?? 0.01,
    });
    this.beta1 = beta1;
    this.beta2 = beta2;
    this.eps = eps;
  }

  get stepCount(): number {
    return this.#step;
  }

  step(): void {
    checkGroups("AdamW", this.groups);
    this.#step++;
    for (const g of this.groups) {
      const hp = {
        lr: g.lr,
        beta1: this.beta1,
        beta2: this.beta2,
        eps: this.eps,
        weightDecay: g.weightDecay,
        step: this.#step,
      };
      for (const p of g.params) {
        let s = this.#state.get(p.value);
        if (s === undefined) {
          const be = p.value.backend;
          // Moments outlive any tidy() around the step.
          s = { m: keep(be.zeros(p.value.shape)), v: keep(be.zeros(p.value.shape)) };
          this.#state.set(p.value, s);
        }
        ops.adamwInPlace(p.value, p.grad, s.m, s.v, hp);
      }
    }
  }

  zeroGrad(): void {
    zeroGroups(this.groups);
  }

  dispose(): void {
    for (const s of this.#state.values()) {
      s.m.dispose();
      s.v.dispose();
    }
    this.#state.clear();
  }
}
