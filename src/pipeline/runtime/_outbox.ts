// The sends of one rank's outputs, for runRank. Not exported from the
// package.
//
// An output is handed to its neighbour without waiting for the receiver: a
// ready array is posted at once, a pending one (a read-back) as soon as it
// resolves. A failed send is kept against its action until the rank can
// report it.

import { type Action, formatAction } from "../schedule/action.ts";
import type { CommBackend } from "../comm/backend.ts";
import type { PendingOutput, StageOutput } from "./rank_executor.ts";
import type { DeviceFailure } from "./_device_timeline.ts";

/** One rank's sends in flight and the first that failed. */
export class Outbox {
  /** The first failed send, if any. */
  failure: DeviceFailure | null = null;
  readonly #comm: CommBackend;
  readonly #sends = new Set<Promise<void>>();

  constructor(comm: CommBackend) {
    this.#comm = comm;
  }

  /**
   * Hands `out`, action `a`'s output in `iteration`, to `peer` under `tag`:
   * a ready array is posted before this returns. Throws a TypeError where
   * the action gave no output.
   */
  post(a: Action, iteration: number, peer: number, tag: string, out: StageOutput): void {
    if (out === null || out === undefined) {
      throw new TypeError(`${formatAction(a)} returned no output for rank ${peer}`);
    }
    const data = out instanceof Float32Array ? out : (out as PendingOutput).pending;
    const p: Promise<void> = this.#comm.send(peer, tag, data, { transfer: true }).catch(
      (cause) => {
        this.failure ??= { action: a, iteration, cause };
      },
    ).finally(() => this.#sends.delete(p));
    this.#sends.add(p);
  }

  /** Resolves once every send posted so far (and any posted meanwhile) has settled. */
  async drain(): Promise<void> {
    while (this.#sends.size > 0) await Promise.all([...this.#sends]);
  }
}
