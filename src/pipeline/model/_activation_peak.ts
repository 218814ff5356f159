// The peak activation figure of a model rank's iteration. Not exported from
// the package.
//
// The figure is the backend's peak live bytes above the rank's training
// state: its parameters and gradients, its optimizer state and the copies a
// step keeps for a rollback, counted tensor by tensor (live bytes at a
// quiet moment would also count read-backs still under way). A change of
// that state (an optimizer step, its copies made or dropped) goes through
// `change`: the peak so far counts against the old state, and the step's
// own temporaries count as none.

import type { MemoryStats } from "../../tensor/backend.ts";

/** One rank's peak activation bytes in the current iteration. */
export class ActivationPeak {
  readonly #memory: MemoryStats;
  readonly #stateBytes: () => number;
  // Bytes of the training state the backend's peak counts above.
  #base: number;
  #peak = 0;

  /** `stateBytes`: the bytes of the rank's training state now. */
  constructor(memory: MemoryStats, stateBytes: () => number) {
    this.#memory = memory;
    this.#stateBytes = stateBytes;
    this.#base = stateBytes();
  }

  /** Starts an iteration: no peak yet, counted above the state as it is. */
  begin(): void {
    this.#base = this.#stateBytes();
    this.#memory.resetPeak();
    this.#peak = 0;
  }

  /** Runs `change`, which changes the training state (see the header). */
  change<T>(change: () => T): T {
    this.#peak = Math.max(this.#peak, this.#memory.peakBytes - this.#base);
    try {
      return change();
    } finally {
      this.#base = this.#stateBytes();
      this.#memory.resetPeak();
    }
  }

  /** The iteration's peak so far, counting the backend's peak since the last change. */
  read(): number {
    this.#peak = Math.max(this.#peak, this.#memory.peakBytes - this.#base);
    return this.#peak;
  }
}
