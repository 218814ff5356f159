/**
 * A synthetic {@linkcode RankExecutor}: every action takes a fixed number
 * of milliseconds (sleeping, so that a 2-core machine can host many ranks)
 * and sends a small payload that names its origin, which the receiver
 * checks. It measures the runtime against the simulator independently of
 * the core count (faults for fail-fast tests come from the rank group's
 * `fault` option, on any executor).
 *
 * @module
 */

import { type ActionKind, formatAction } from "../schedule/action.ts";
import type {
  RankExecutor,
  RankExecutorInit,
  StageContext,
  StageOutput,
} from "../runtime/rank_executor.ts";
import { describeValue } from "../../text/describe.ts";

/** Milliseconds per action kind; as in `simulate`, B defaults to I + W. */
export type SyntheticCosts = Readonly<Record<ActionKind, number>>;

/** Options of the synthetic executor. */
export interface SyntheticExecutorOptions {
  /**
   * Milliseconds per action: one number for F = I = W (then B = 2×), or per
   * kind (missing F, I, W default to 1; I = B − W when only B is given; B
   * defaults to I + W). Default 1.
   */
  readonly ms?: number | Partial<Record<ActionKind, number>>;
  /** Milliseconds each optimizer step takes (default 0). */
  readonly stepMs?: number;
  /** Floats in each payload sent (default 16; at least 4 for the origin check). */
  readonly payloadFloats?: number;
  /**
   * How an action waits: `"timer"` (setTimeout; the event loop keeps
   * running) or `"block"` (Atomics.wait on the abort flag: the thread is
   * held like real compute, without using a core, and wakes on abort).
   * Default `"timer"`; use `"block"` only in workers.
   */
  readonly sleep?: "timer" | "block";
}

/**
 * Resolves per-kind milliseconds exactly as `simulate` resolves its costs,
 * so the same numbers can be given to both.
 *
 * @example
 * ```ts
 * import { syntheticCosts } from "@conveyor/core/testing";
 * console.log(syntheticCosts(20)); // { F: 20, I: 20, W: 20, B: 40 }
 * ```
 */
export function syntheticCosts(ms: SyntheticExecutorOptions["ms"] = 1): SyntheticCosts {
  const check = (v: unknown, what: string): number => {
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new RangeError(
        `synthetic ${what} must be a finite number >= 0 ms, got ${describeValue(v)}`,
      );
    }
    return v;
  };
  if (typeof ms === "number") {
    const t = check(ms, "ms");
    return { F: t, I: t, W: t, B: 2 * t };
  }
  if (ms === null || typeof ms !== "object") {
    throw new TypeError(
      `synthetic ms must be a number or { F, B, I, W }, got ${describeValue(ms)}`,
    );
  }
  const F = check(ms.F ?? 1, "F");
  const W = check(ms.W ?? 1, "W");
  const I = check(ms.I ?? (ms.B !== undefined ? check(ms.B, "B") - W : 1), "I (B − W)");
  const B = check(ms.B ?? I + W, "B");
  return { F, I, W, B };
}

const ACTIVATION = 1;
const GRADIENT = 2;

class SyntheticExecutor implements RankExecutor {
  #init: RankExecutorInit;
  #costs: SyntheticCosts;
  #stepMs: number;
  #floats: number;
  #block: boolean;
  #forwarded = new Set<string>();
  #pendingW = new Set<string>();
  #actions = 0;
  #lateness = 0.1;

  constructor(init: RankExecutorInit) {
    const o = (init.options ?? {}) as SyntheticExecutorOptions;
    if (o === null || typeof o !== "object") {
      throw new TypeError(`synthetic executor options must be an object, got ${describeValue(o)}`);
    }
    this.#init = init;
    this.#costs = syntheticCosts(o.ms);
    this.#stepMs = syntheticCosts(o.stepMs ?? 0).F;
    const floats = o.payloadFloats ?? 16;
    if (!Number.isInteger(floats) || floats < 1) {
      throw new RangeError(
        `payloadFloats must be a positive integer, got ${describeValue(floats)}`,
      );
    }
    this.#floats = floats;
    if (o.sleep !== undefined && o.sleep !== "timer" && o.sleep !== "block") {
      throw new TypeError(`sleep must be "timer" or "block", got ${JSON.stringify(o.sleep)}`);
    }
    this.#block = o.sleep === "block";
  }

  async forward(ctx: StageContext, input: Float32Array | null): Promise<StageOutput> {
    const { stage, microBatch } = ctx.action;
    if (!ctx.isFirstStage) this.#checkOrigin(ctx, input, ACTIVATION, stage - 1);
    await this.#work(this.#costs.F);
    this.#forwarded.add(`${stage}/${microBatch}`);
    return ctx.isLastStage ? null : this.#payload(ctx, ACTIVATION);
  }

  async backward(ctx: StageContext, gradOutput: Float32Array | null): Promise<StageOutput> {
    this.#checkBackward(ctx, gradOutput);
    await this.#work(this.#costs.B);
    return ctx.isFirstStage ? null : this.#payload(ctx, GRADIENT);
  }

  async backwardInput(ctx: StageContext, gradOutput: Float32Array | null): Promise<StageOutput> {
    this.#checkBackward(ctx, gradOutput);
    await this.#work(this.#costs.I);
    this.#pendingW.add(`${ctx.action.stage}/${ctx.action.microBatch}`);
    return ctx.isFirstStage ? null : this.#payload(ctx, GRADIENT);
  }

  async backwardWeight(ctx: StageContext): Promise<void> {
    const key = `${ctx.action.stage}/${ctx.action.microBatch}`;
    if (!this.#pendingW.delete(key)) {
      throw new Error(`synthetic executor: ${formatAction(ctx.action)} ran before its I pass`);
    }
    await this.#work(this.#costs.W);
  }

  async step(): Promise<void> {
    if (this.#stepMs > 0) await this.#sleep(this.#stepMs);
  }

  endIteration(iteration: number): unknown {
    const report = { iteration, actions: this.#actions };
    this.#actions = 0;
    this.#forwarded.clear();
    return report;
  }

  #checkBackward(ctx: StageContext, gradOutput: Float32Array | null): void {
    const { stage, microBatch } = ctx.action;
    if (!this.#forwarded.delete(`${stage}/${microBatch}`)) {
      throw new Error(`synthetic executor: ${formatAction(ctx.action)} ran before its forward`);
    }
    if (!ctx.isLastStage) this.#checkOrigin(ctx, gradOutput, GRADIENT, stage + 1);
  }

  // The payload names its space, sending stage, micro-batch and iteration, so
  // a message routed to the wrong action is caught where it arrives.
  #checkOrigin(ctx: StageContext, data: Float32Array | null, space: number, from: number): void {
    const want = [space, from, ctx.action.microBatch, ctx.iteration];
    const got = data === null ? null : Array.from(data.subarray(0, 4));
    const n = Math.min(4, this.#floats);
    if (got === null || want.slice(0, n).some((v, i) => got[i] !== v)) {
      throw new Error(
        `synthetic executor: ${formatAction(ctx.action)} (iteration ${ctx.iteration}) ` +
          `expected payload [${want.slice(0, n)}], got ${got === null ? "null" : `[${got}]`}`,
      );
    }
  }

  #payload(ctx: StageContext, space: number): Float32Array {
    const out = new Float32Array(this.#floats);
    out.set([space, ctx.action.stage, ctx.action.microBatch, ctx.iteration].slice(0, this.#floats));
    return out;
  }

  async #work(ms: number): Promise<void> {
    this.#actions++;
    await this.#sleep(ms);
  }

  #sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    if (!this.#block) return new Promise((resolve) => setTimeout(resolve, ms));
    return this.#blockFor(ms) ? Promise.resolve() : Promise.reject(
      new Error("synthetic action interrupted: run aborted"),
    );
  }

  // Holds the thread for `ms` without using a core: Atomics.wait on the
  // abort flag, asking for less than `ms` by the wake-up lateness seen so far,
  // then checking the clock for the last fraction of a millisecond. Returns
  // false when the run was aborted meanwhile.
  #blockFor(ms: number): boolean {
    const flag = this.#init.abortFlag;
    const until = performance.now() + ms;
    for (;;) {
      const left = until - performance.now();
      if (left <= 0) return true;
      const ask = left - this.#lateness;
      if (ask <= 0.05) break;
      const t = performance.now();
      if (Atomics.wait(flag, 0, 0, ask) !== "timed-out") return false;
      const late = performance.now() - t - ask;
      this.#lateness = Math.min(1, Math.max(0, 0.8 * this.#lateness + 0.2 * late));
    }
    while (performance.now() < until) {
      if (Atomics.load(flag, 0) !== 0) return false;
    }
    return true;
  }
}

/**
 * Builds a synthetic executor (see {@linkcode SyntheticExecutorOptions} for
 * `init.options`). Also exported as `createRankExecutor`, the name a
 * worker looks for in an executor module.
 *
 * @example
 * ```ts
 * import { InProcessBackend } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * const [comm] = InProcessBackend.createGroup(1);
 * const ex = createSyntheticExecutor({
 *   rank: 0, ranks: 1, stages: [0], numStages: 1, microBatches: 1, options: { ms: 0 },
 *   abortFlag: new Int32Array(1), signal: new AbortController().signal, comm,
 * });
 * const action = { kind: "F" as const, stage: 0, microBatch: 0 };
 * const ctx = { rank: 0, action, iteration: 0, isFirstStage: true, isLastStage: true, forwardOnly: false };
 * console.log(await ex.forward(ctx, null)); // null: the last stage sends nothing on
 * comm.close();
 * ```
 */
export function createSyntheticExecutor(init: RankExecutorInit): RankExecutor {
  return new SyntheticExecutor(init);
}

/**
 * This module's URL: the `module` of a worker rank group's executor choice
 * for the synthetic executor.
 *
 * @example
 * ```ts
 * import { SYNTHETIC_EXECUTOR_URL } from "@conveyor/core/testing";
 * console.log(SYNTHETIC_EXECUTOR_URL.endsWith("synthetic_executor.ts")); // true
 * ```
 */
export const SYNTHETIC_EXECUTOR_URL: string = import.meta.url;

/** The executor-module entry point: same as {@linkcode createSyntheticExecutor}. */
export const createRankExecutor: (init: RankExecutorInit) => RankExecutor = createSyntheticExecutor;
