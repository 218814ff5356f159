// Device timing of one rank's actions, for runRank. Not exported from the
// package.
//
// An action's work is done when its call settles or, where the executor's
// `deviceDone()` gives a promise after it (work queued on a device, as on
// WebGPU, whose calls only record commands), when that promise settles;
// when it settles to a span from the device's timestamps, the event is that
// span exactly. Otherwise a pending output's read-back dates the end when
// it comes first (the read-back follows the action's kernels in the
// device's queue, so the event never ends after it). A rank's
// device runs its work in order, so no work begins before the previous
// work (action or optimizer step) ended: an event starts at
// max(call, previous end) and ends when its work is done, never before it
// starts. On the CPU that is simply the call and its return.

import type { Action } from "../schedule/action.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import type { DeviceSpan } from "./rank_executor.ts";

/** A device failure, kept until the rank can report it against its action. */
export interface DeviceFailure {
  /** The action whose device work failed. */
  readonly action: Action;
  /** Its iteration. */
  readonly iteration: number;
  /** What the device reported. */
  readonly cause: unknown;
}

/** Collects one rank's timed events as their device work settles. */
export class DeviceTimeline {
  /** Every action timed so far, in list order; times are final once `settled()` resolves. */
  readonly events: TimedEvent[] = [];
  /** The first device failure, if any. */
  failure: DeviceFailure | null = null;
  readonly #rank: number;
  readonly #clock: () => number;
  // When the rank's device finished the latest work dated so far.
  #deviceEnd = -Infinity;
  // Settles once every earlier piece of work is dated (null: none outstanding).
  #pending: Promise<void> | null = null;
  // Events dated by device timestamps, converted to host time at the end.
  #spans: { at: number; span: DeviceSpan }[] = [];

  // The clock's offset from this thread's performance.now(), in which device
  // spans are converted (a worker's clock is shifted to the main thread's).
  readonly #shift: number;

  constructor(rank: number, clock: () => number) {
    this.#rank = rank;
    this.#clock = clock;
    this.#shift = clock() - performance.now();
  }

  /**
   * Dates work called at `start` whose call returned at `returned`: an event
   * for `action` when `event`, else (an optimizer step) device time only.
   * `done` is the executor's `deviceDone()` after the call; `output` a
   * pending read-back of the action's output, if any.
   */
  add(
    action: Action,
    iteration: number,
    start: number,
    returned: number,
    event: boolean,
    done: PromiseLike<void | DeviceSpan> | undefined,
    output: PromiseLike<unknown> | undefined,
  ): void {
    const at = event ? this.events.length : -1;
    if (event) this.events.push({ rank: this.#rank, action, iteration, start, end: returned });
    if (done === undefined && this.#pending === null) {
      this.#settle(start, returned, at);
      return;
    }
    // A span from the device's timestamps dates the work exactly; else its
    // end is when completion was seen.
    let span: DeviceSpan | null = null;
    const ends: Promise<number>[] = [
      done === undefined ? Promise.resolve(returned) : Promise.resolve(done).then(
        (d) => {
          if (d !== undefined && d !== null && typeof d === "object") span = d;
          return this.#clock();
        },
        (cause) => {
          this.failure ??= { action, iteration, cause };
          return returned;
        },
      ),
    ];
    // A failed read-back is the send's error; here it only gives no time.
    if (output !== undefined) {
      ends.push(Promise.resolve(output).then(() => this.#clock(), () => new Promise(() => {})));
    }
    const link: Promise<void> = Promise.all([this.#pending, Promise.race(ends)]).then(
      ([, t]) => {
        const s = span as DeviceSpan | null;
        if (s !== null) {
          if (at >= 0) this.#spans.push({ at, span: s });
        } else this.#settle(start, t, at);
        if (this.#pending === link) this.#pending = null;
      },
    );
    this.#pending = link;
  }

  /** Resolves once every event added so far has its final times. */
  async settled(): Promise<void> {
    while (this.#pending !== null) await this.#pending;
    // One offset for all: the tightest the device's timestamps have given.
    for (const { at, span } of this.#spans.splice(0)) {
      const offset = span.hostMinusDevice() + this.#shift;
      this.events[at] = { ...this.events[at], start: span.start + offset, end: span.end + offset };
    }
  }

  #settle(start: number, end: number, at: number): void {
    const s = Math.max(start, this.#deviceEnd);
    this.#deviceEnd = Math.max(end, s);
    if (at >= 0) this.events[at] = { ...this.events[at], start: s, end: this.#deviceEnd };
  }
}
