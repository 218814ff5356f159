// How a model stage dates its actions' device work (WebGPU, whose calls
// only record commands): a timestamp mark where an action starts, one where
// its work ends (before its output's read-back, which waits for the
// device), and the span between them once a later read-back or sync has
// read them (the runtime's `deviceDone`). On the CPU the work is done when
// the call returns: nothing to date. Not exported from the package.

import type { Backend } from "../../tensor/backend.ts";
import type { DeviceSpan } from "../runtime/rank_executor.ts";

/** The device span of the action (or optimizer step) being run. */
export class ActionSpan {
  readonly #backend: Backend;
  readonly #device: boolean;
  #start: Promise<number> | undefined;
  #end: Promise<number> | undefined;

  constructor(backend: Backend) {
    this.#backend = backend;
    this.#device = backend.name !== "cpu";
  }

  /** Marks where an action's or step's work starts. */
  begin(): void {
    if (this.#device) this.#start = this.#backend.timeMark?.();
  }

  /** Marks where its work ends, before a read-back of its output. */
  end(): void {
    if (this.#device) this.#end = this.#backend.timeMark?.();
  }

  /**
   * After the action: submits its work and gives a promise of its span
   * (of its completion, without timestamps); undefined on the CPU.
   */
  done(): Promise<void | DeviceSpan> | undefined {
    if (!this.#device) return undefined;
    const backend = this.#backend;
    const [start, end] = [this.#start, this.#end ?? backend.timeMark?.()];
    this.#start = this.#end = undefined;
    if (start === undefined || end === undefined) return backend.sync();
    backend.flush();
    return Promise.all([start, end]).then(([s, e]) => ({
      start: s,
      end: e,
      hostMinusDevice: () => backend.hostMinusDevice?.() ?? NaN,
    }));
  }
}
