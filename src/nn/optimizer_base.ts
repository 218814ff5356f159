/**
 * What SGD and AdamW share beyond the `Optimizer` interface: per-parameter
 * state tensors ("slots", named as PyTorch names them in its state dict),
 * a learning-rate schedule applied before every step, a learning rate set
 * by hand, and the whole state as plain data for checkpoints
 * ({@linkcode OptimizerState}), so that a stopped run resumes bit for bit.
 *
 * @module
 */

import { keep } from "../tensor/tidy.ts";
import * as ops from "../tensor/ops.ts";
import type { Tensor } from "../tensor/mod.ts";
import type { Parameter } from "./layer.ts";
import {
  checkGroups,
  checkNonNegative,
  makeGroups,
  type Optimizer,
  type ParamGroup,
  type ParamGroupSpec,
  zeroGroups,
} from "./optimizer.ts";
import { checkLrSchedule, lrAtChecked, type LrScheduleSpec } from "./lr_schedule.ts";
import { checkValues } from "./_state_values.ts";
import { describeValue } from "../text/describe.ts";

/** Options of {@linkcode OptimizerBase.loadState} and {@linkcode OptimizerBase.checkState}. */
export interface LoadStateOptions {
  /**
   * Accept NaN and ±Infinity in the state slots (default `false`). A
   * negative `exp_avg_sq` is refused either way.
   */
  readonly allowNonFinite?: boolean;
}

/**
 * What {@linkcode OptimizerBase.snapshot} keeps (on the parameters' backends):
 * enough for `restore` to undo the steps taken since, bit for bit.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { AdamW, type OptimizerSnapshot } from "@conveyor/core/nn";
 * const lin = new Linear(new CpuBackend(), 2, 2, { seed: 1 });
 * const opt = new AdamW(lin.parameters(), { lr: 0.1 });
 * const snap: OptimizerSnapshot = opt.snapshot();
 * assert.equal(snap.step, 0);
 * snap.dispose();
 * ```
 */
export interface OptimizerSnapshot {
  /** The step count. */
  readonly step: number;
  /** Every parameter's value, in the optimizer's parameter order. */
  readonly values: readonly Tensor[];
  /** Every state slot, per parameter value tensor. */
  readonly slots: ReadonlyMap<Tensor, readonly Tensor[]>;
  /** Releases the copies. Idempotent. */
  dispose(): void;
}

/**
 * An optimizer's state as plain data: enough, with the parameters' values,
 * to continue training exactly where it stopped.
 */
export interface OptimizerState {
  /** Steps taken (AdamW's bias correction and the lr schedule's position). */
  readonly step: number;
  /** The lr set by `setLearningRate` (it replaces the schedule), or null. */
  readonly lrOverride: number | null;
  /**
   * Per parameter name: its slots' values in `stateSlots` order (row-major,
   * the parameter's shape). Empty before the first step and for optimizers
   * without slots (SGD without momentum).
   */
  readonly slots: ReadonlyMap<string, readonly Float32Array[]>;
}

/**
 * An optimizer's description as plain data (the shape of an
 * `OptimizerSpec`): its kind, every hyper-parameter with defaults filled
 * in, and its lr schedule.
 */
export interface OptimizerDescription {
  /** `"sgd"` or `"adamw"`. */
  readonly kind: "sgd" | "adamw";
  /** Hyper-parameters by name (`lr`, `weightDecay`, `momentum`, `beta1`, …) and `lrSchedule`. */
  readonly [hyperParameter: string]: unknown;
}

/** Hyper-parameters every optimizer has. */
export interface OptimizerBaseOptions {
  /** Default learning rate of groups that set none. */
  readonly lr: number;
  /** Default weight decay of groups that set none. */
  readonly weightDecay: number;
  /** Learning-rate schedule (absent: the groups' lr as they are). */
  readonly lrSchedule?: LrScheduleSpec;
}

/**
 * The base of {@linkcode SGD} and {@linkcode AdamW}: parameter groups,
 * lazily allocated state slots, the step count, the learning rate of each
 * step and the state as data. Subclasses give `update`, one parameter's
 * step.
 *
 * The learning rate of a step: the one set by `setLearningRate` when there
 * is one; else, with an `lrSchedule`, `lrAt(lrSchedule, group's initial lr,
 * stepCount)` written into every group before the step (the schedule owns
 * the groups' `lr`); else each group's `lr` as it stands (callers may
 * change it between steps).
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { AdamW, type OptimizerBase } from "@conveyor/core/nn";
 * const lin = new Linear(new CpuBackend(), 2, 2, { seed: 1 });
 * const opt: OptimizerBase = new AdamW(lin.parameters(), {
 *   lr: 0.1, lrSchedule: { kind: "step", stepSize: 1, gamma: 0.5 },
 * });
 * opt.step();
 * opt.step();
 * console.log(opt.stepCount, opt.groups[0].lr, opt.learningRate); // 2 0.05 0.025
 * const state = await opt.saveState();
 * console.log([...state.slots.keys()], opt.stateSlots); // [ "weight", "bias" ] [ "exp_avg", "exp_avg_sq" ]
 * opt.dispose();
 * lin.dispose();
 * ```
 */
export abstract class OptimizerBase implements Optimizer {
  /** Which optimizer (the `kind` of its spec). */
  abstract readonly kind: "sgd" | "adamw";
  /** The parameter groups. */
  readonly groups: readonly ParamGroup[];
  /** Names of the per-parameter state tensors, as in PyTorch's state dict. */
  readonly stateSlots: readonly string[];
  readonly #where: string;
  readonly #defaults: { readonly lr: number; readonly weightDecay: number };
  readonly #baseLrs: readonly number[];
  readonly #schedule: LrScheduleSpec | null;
  readonly #slots = new Map<Tensor, Tensor[]>();
  #step = 0;
  #override: number | null = null;

  /** Checks and builds the groups; `where` names the optimizer in errors. */
  protected constructor(
    where: string,
    params: readonly Parameter[] | readonly ParamGroupSpec[],
    options: OptimizerBaseOptions,
    stateSlots: readonly string[],
  ) {
    this.#where = where;
    this.#schedule = options.lrSchedule === undefined
      ? null
      : checkLrSchedule(options.lrSchedule, `${where}: lrSchedule`);
    this.#defaults = { lr: options.lr, weightDecay: options.weightDecay };
    this.groups = makeGroups(where, params, this.#defaults);
    this.#baseLrs = this.groups.map((g) => g.lr);
    this.stateSlots = [...stateSlots];
  }

  /**
   * The optimizer as plain data, as an `OptimizerSpec` would give it:
   * `{ kind, lr, …hyper-parameters, weightDecay, lrSchedule? }` with the
   * defaults of groups that set none, and every default filled in.
   */
  spec(): OptimizerDescription {
    return {
      kind: this.kind,
      lr: this.#defaults.lr,
      ...this.hyperParameters(),
      weightDecay: this.#defaults.weightDecay,
      ...(this.#schedule === null ? {} : { lrSchedule: this.#schedule }),
    };
  }

  /** The subclass's own hyper-parameters, in its spec's key order. */
  protected abstract hyperParameters(): Record<string, number>;

  /** Number of `step()` calls so far (or the step count a loaded state set). */
  get stepCount(): number {
    return this.#step;
  }

  /** The learning-rate schedule, or null. */
  get lrSchedule(): LrScheduleSpec | null {
    return this.#schedule;
  }

  /** The lr set by {@linkcode OptimizerBase.setLearningRate}, or null. */
  get lrOverride(): number | null {
    return this.#override;
  }

  /** The learning rate the next step gives the first group. */
  get learningRate(): number {
    return this.#lrOf(0);
  }

  /**
   * Fixes the learning rate of every group at `lr` for the following steps,
   * replacing the schedule (a user's own rule: call it before each step).
   * Throws a RangeError unless `lr` is a finite number ≥ 0.
   */
  setLearningRate(lr: number): void {
    checkNonNegative(this.#where, "lr", lr);
    this.#override = lr;
    for (const g of this.groups) g.lr = lr;
  }

  /** Updates every parameter from its accumulated gradient. */
  step(): void {
    for (let i = 0; i < this.groups.length; i++) {
      (this.groups[i] as ParamGroup).lr = this.#lrOf(i);
    }
    checkGroups(this.#where, this.groups);
    this.#step++;
    for (const g of this.groups) {
      for (const p of g.params) {
        let slots = this.#slots.get(p.value);
        if (slots === undefined) {
          // Zeros make the first fused step exactly PyTorch's first step.
          // State slots outlive any tidy() around the step.
          slots = this.stateSlots.map(() => keep(p.value.backend.zeros(p.value.shape)));
          this.#slots.set(p.value, slots);
        }
        this.update(p, slots, g, this.#step);
      }
    }
  }

  /** One parameter's update, `slots` in `stateSlots` order, `step` counted from 1. */
  protected abstract update(
    p: Parameter,
    slots: readonly Tensor[],
    group: ParamGroup,
    step: number,
  ): void;

  /** Sets every gradient to zero. */
  zeroGrad(): void {
    zeroGroups(this.groups);
  }

  /** Bytes of the state slots allocated so far (none before the first step or load). */
  get stateBytes(): number {
    let n = 0;
    for (const slots of this.#slots.values()) for (const t of slots) n += t.bytes;
    return n;
  }

  /** Releases the state tensors. */
  dispose(): void {
    for (const slots of this.#slots.values()) for (const t of slots) t.dispose();
    this.#slots.clear();
  }

  /**
   * A copy, on the parameters' own backends, of everything a step changes:
   * every parameter's value, every state slot and the step count, for an
   * exact {@linkcode OptimizerBase.restore} (a step found wrong after the
   * fact is undone bit for bit). No read-back; it holds a second copy of
   * the parameters and state until disposed.
   */
  snapshot(): OptimizerSnapshot {
    const values = this.#params().map((p) => keep(ops.copy(p.value)));
    const slots = new Map<Tensor, Tensor[]>();
    for (const [t, ss] of this.#slots) slots.set(t, ss.map((x) => keep(ops.copy(x))));
    let disposed = false;
    return {
      step: this.#step,
      values,
      slots,
      dispose: () => {
        if (disposed) return;
        disposed = true;
        for (const v of values) v.dispose();
        for (const ss of slots.values()) for (const t of ss) t.dispose();
      },
    };
  }

  /**
   * Puts back what `snap` copied: parameter values, state slots (a slot
   * created since, at a first step, is released: there was none before) and
   * the step count. The snapshot stays usable until disposed.
   */
  restore(snap: OptimizerSnapshot): void {
    const params = this.#params();
    if (snap.values.length !== params.length) {
      throw new RangeError(
        `${this.#where}: a snapshot of ${snap.values.length} parameters cannot restore ${params.length}`,
      );
    }
    params.forEach((p, i) => ops.copyInPlace(p.value, snap.values[i]));
    for (const [t, ss] of this.#slots) {
      const saved = snap.slots.get(t);
      if (saved === undefined) {
        for (const x of ss) x.dispose();
        this.#slots.delete(t);
      } else {
        ss.forEach((x, i) => ops.copyInPlace(x, saved[i]));
      }
    }
    this.#step = snap.step;
  }

  /** The state as plain data (reads every slot back from its backend). */
  async saveState(): Promise<OptimizerState> {
    const params = this.#params();
    const entries = await Promise.all(params.map(async (p) => {
      const slots = this.#slots.get(p.value);
      if (slots === undefined) return null;
      return [p.name, await Promise.all(slots.map((t) => t.toArray()))] as const;
    }));
    return {
      step: this.#step,
      lrOverride: this.#override,
      slots: new Map(entries.filter((e) => e !== null)),
    };
  }

  /**
   * Checks that `state` fits this optimizer, as {@linkcode OptimizerBase.loadState}
   * does before changing anything: the step count, the override, every
   * parameter's slots present with its size after the first step, none
   * before it, no unknown parameter, every value finite (unless
   * `allowNonFinite`) and no negative `exp_avg_sq` (errors name the
   * parameter, the slot, the index and the rule).
   */
  checkState(state: OptimizerState, options?: LoadStateOptions): void {
    const w = this.#where;
    if (state === null || typeof state !== "object") {
      throw new TypeError(
        `${w}: state must be an object { step, lrOverride, slots }, got ${describeValue(state)}`,
      );
    }
    if (!Number.isSafeInteger(state.step) || state.step < 0) {
      throw new RangeError(
        `${w}: state.step must be an integer ≥ 0, got ${describeValue(state.step)}`,
      );
    }
    const override = state.lrOverride ?? null;
    if (override !== null) checkNonNegative(w, "state.lrOverride", override);
    if (!(state.slots instanceof Map)) {
      throw new TypeError(`${w}: state.slots must be a Map of parameter name to slot arrays`);
    }
    const params = this.#params();
    const byName = new Map(params.map((p) => [p.name, p]));
    for (const name of state.slots.keys()) {
      if (!byName.has(name)) {
        throw new RangeError(`${w}: the state has slots for ${name}, a parameter it lacks`);
      }
    }
    const n = this.stateSlots.length;
    if (state.slots.size > 0 && n === 0) {
      throw new RangeError(
        `${w}: the state has slots for ${
          [...state.slots.keys()][0]
        }, but this optimizer keeps none (${this.describeState()})`,
      );
    }
    if (state.slots.size > 0 && state.step === 0) {
      throw new RangeError(`${w}: a state at step 0 must have no slots (they start at step 1)`);
    }
    if (state.step > 0 && n > 0) {
      for (const p of params) {
        const s = state.slots.get(p.name);
        if (s === undefined) {
          throw new RangeError(
            `${w}: the state at step ${state.step} has no ${
              this.stateSlots.join("/")
            } for parameter ${p.name}`,
          );
        }
        if (!Array.isArray(s) || s.length !== n) {
          throw new RangeError(
            `${w}: parameter ${p.name} needs ${n} slot(s) (${this.stateSlots.join(", ")}), got ${
              Array.isArray(s) ? s.length : typeof s
            }`,
          );
        }
        s.forEach((d, i) => {
          if (!(d instanceof Float32Array) || d.length !== p.value.size) {
            throw new RangeError(
              `${w}: slot ${
                this.stateSlots[i]
              } of ${p.name} must be a Float32Array of ${p.value.size} values, got ${
                d instanceof Float32Array ? d.length : typeof d
              }`,
            );
          }
          const slot = this.stateSlots[i];
          checkValues(`${w}: `, `${p.name}.${slot}`, d, slot, options?.allowNonFinite ?? false);
        });
      }
    }
  }

  /**
   * Replaces the state with `state` (weights are not part of it). Everything
   * is checked first ({@linkcode OptimizerBase.checkState}, with `options`),
   * so a refused state changes nothing.
   */
  loadState(state: OptimizerState, options?: LoadStateOptions): void {
    this.checkState(state, options);
    const byName = new Map(this.#params().map((p) => [p.name, p]));
    const override = state.lrOverride ?? null;
    // Checked: now replace.
    this.dispose();
    for (const [name, datas] of state.slots) {
      const p = byName.get(name)!;
      this.#slots.set(
        p.value,
        datas.map((d: Float32Array) => p.value.backend.fromData(d, p.value.shape)),
      );
    }
    this.#step = state.step;
    this.#override = override;
    if (override !== null) { for (const g of this.groups) g.lr = override; }
  }

  /** Describes the optimizer's state layout in errors (subclasses add their settings). */
  protected describeState(): string {
    return `${this.kind} with slots ${this.stateSlots.join(", ") || "none"}`;
  }

  #lrOf(i: number): number {
    if (this.#override !== null) return this.#override;
    if (this.#schedule !== null) return lrAtChecked(this.#schedule, this.#baseLrs[i], this.#step);
    return this.groups[i].lr;
  }

  #params(): Parameter[] {
    const seen = new Set<string>();
    const out: Parameter[] = [];
    for (const g of this.groups) {
      for (const p of g.params) {
        if (seen.has(p.name)) {
          throw new RangeError(
            `${this.#where}: parameter name ${p.name} appears twice; the state is keyed by name`,
          );
        }
        seen.add(p.name);
        out.push(p);
      }
    }
    return out;
  }
}
