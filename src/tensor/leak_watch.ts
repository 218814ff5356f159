/**
 * `LeakWatch`: a once-per-step check that warns when a backend's live tensor
 * memory keeps growing, the usual sign of a tensor created every step and
 * never disposed.
 *
 * @module
 */

import { checkOptionsObject } from "../text/nearest.ts";
import type { MemoryStats } from "./backend.ts";

/**
 * Options of {@linkcode LeakWatch}.
 *
 * @example
 * ```ts
 * import type { LeakWatchOptions } from "@conveyor/core/tensor";
 * const opts: LeakWatchOptions = { patience: 10, warn: (m) => console.error(m) };
 * console.log(opts.patience);
 * ```
 */
export interface LeakWatchOptions {
  /** Consecutive growing steps before the warning (default 5). */
  readonly patience?: number;
  /** Where the warning goes (default `console.warn`). */
  readonly warn?: (message: string) => void;
}

/**
 * Watches `memory.liveBytes` (a backend's `memory`) across training steps.
 * Call {@linkcode LeakWatch.check} once per step, after the step's
 * temporaries should have been released: after `patience` consecutive
 * checks that each saw more live bytes than the one before, it warns once,
 * naming the bytes, and stays quiet after that (until `reset()`). A step
 * that does not grow restarts the count.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { LeakWatch, ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const warnings: string[] = [];
 * const watch = new LeakWatch(be.memory, { patience: 3, warn: (m) => warnings.push(m) });
 * const leaked = [];
 * for (let step = 0; step < 6; step++) {
 *   leaked.push(ops.full(be, [256], step)); // forgotten every step: 1 KiB
 *   watch.check(step);
 * }
 * assert.equal(warnings.length, 1); // once, after 3 growing steps
 * assert.match(warnings[0], /grew 3 steps in a row/);
 * ```
 */
export class LeakWatch {
  readonly #memory: MemoryStats;
  readonly #patience: number;
  readonly #warn: (message: string) => void;
  #last: number | null = null;
  #start = 0;
  #growths = 0;
  #warned = false;

  /** Watches `memory` (e.g. `backend.memory`). */
  constructor(memory: MemoryStats, opts: LeakWatchOptions = {}) {
    if (memory === null || typeof memory !== "object" || typeof memory.liveBytes !== "number") {
      throw new TypeError(
        `LeakWatch: memory must be a backend's MemoryStats (backend.memory), got ${
          memory === null ? "null" : typeof memory
        }`,
      );
    }
    checkOptionsObject(opts, ["patience", "warn"], "LeakWatch: ");
    const patience = opts.patience ?? 5;
    if (!Number.isInteger(patience) || patience < 1) {
      throw new RangeError(`LeakWatch: patience must be a positive integer, got ${patience}`);
    }
    this.#memory = memory;
    this.#patience = patience;
    this.#warn = opts.warn ?? ((m) => console.warn(m));
  }

  /** Consecutive growing checks so far. */
  get growths(): number {
    return this.#growths;
  }

  /**
   * Records this step's live bytes; returns true on the call that warns.
   * `step` only labels the message.
   */
  check(step?: number): boolean {
    const now = this.#memory.liveBytes;
    const last = this.#last;
    this.#last = now;
    if (last === null || now <= last) {
      this.#growths = 0;
      return false;
    }
    if (this.#growths === 0) this.#start = last;
    this.#growths++;
    if (this.#warned || this.#growths < this.#patience) return false;
    this.#warned = true;
    const grown = now - this.#start;
    this.#warn(
      `LeakWatch: live tensor memory grew ${this.#growths} steps in a row${
        step === undefined ? "" : ` (to step ${step})`
      }, from ${this.#start} to ${now} bytes (+${grown} bytes, about ${
        Math.round(grown / this.#growths)
      } per step): a tensor is probably created every step and never disposed ` +
        "(dispose it, or run the step in tidy() or with `using`)",
    );
    return true;
  }

  /** Forgets the history, so a later growth can warn again. */
  reset(): void {
    this.#last = null;
    this.#growths = 0;
    this.#warned = false;
  }
}
