/**
 * A {@linkcode CommBackend} for a group of ranks that live in one thread:
 * messages go straight into the receiver's mailbox. For tests and for
 * single-threaded runs of the pipeline runtime.
 *
 * @module
 */

import type { CommAbortedError, CommBackend, ControlMessage } from "./backend.ts";
import { checkSize, movedArray } from "./_checks.ts";
import { RankBackend } from "./_rank_backend.ts";

interface BarrierWait {
  resolve(): void;
  reject(error: Error): void;
}

class Group {
  readonly members: InProcessBackend[] = [];
  readonly arrivals = new Map<number, number>();
  readonly waits = new Map<number, BarrierWait[]>();
}

// Set by InProcessBackend's static block so the group can reach private state.
let deliverTo: (target: InProcessBackend, from: number, tag: string, data: Float32Array) => void;
let controlTo: (target: InProcessBackend, message: ControlMessage, from: number) => void;
let abortFrom: (target: InProcessBackend, reason: string) => void;

/**
 * One rank of an in-thread group; create the whole group with
 * {@linkcode InProcessBackend.createGroup}. Transferring sends detach the
 * sender's buffer exactly as a worker transport would, so code that reuses
 * a given-away array fails here too.
 *
 * @example
 * ```ts
 * import { InProcessBackend, makeTag } from "@conveyor/core/runtime";
 * const [r0, r1] = InProcessBackend.createGroup(2);
 * const tag = makeTag({ space: "activation", microBatch: 0, stage: 1, iteration: 0 });
 * const pending = r1.recv(0, tag); // may be called before the message exists
 * await r0.send(1, tag, new Float32Array([3, 4]), { transfer: true });
 * console.log(await pending); // Float32Array(2) [ 3, 4 ]
 * r0.close();
 * r1.close();
 * ```
 */
export class InProcessBackend extends RankBackend implements CommBackend {
  static {
    deliverTo = (t, from, tag, data) => {
      if (!t.closed) t.mailbox.deliver(from, tag, data);
    };
    controlTo = (t, message, from) => {
      if (t.closed) return;
      for (const h of [...t.handlers]) h(structuredClone(message), from);
    };
    abortFrom = (t, reason) => t.abortLocal(reason);
  }

  /**
   * Creates `size` connected ranks.
   *
   * @example
   * ```ts
   * import { InProcessBackend } from "@conveyor/core/runtime";
   * const group = InProcessBackend.createGroup(3);
   * console.log(group.map((b) => b.rank)); // [ 0, 1, 2 ]
   * for (const b of group) b.close();
   * ```
   */
  static createGroup(size: number): InProcessBackend[] {
    checkSize(size);
    const group = new Group();
    for (let r = 0; r < size; r++) group.members.push(new InProcessBackend(group, r, size));
    return [...group.members];
  }

  /** This rank. */
  readonly rank: number;
  /** Ranks in the group. */
  readonly size: number;
  #group: Group;
  #barrierCount = 0;

  private constructor(group: Group, rank: number, size: number) {
    super();
    this.#group = group;
    this.rank = rank;
    this.size = size;
  }

  // A ready array is delivered before send returns.
  /** @ignore */
  protected sendArray(peer: number, tag: string, array: Float32Array, transfer: boolean): void {
    deliverTo(this.#group.members[peer], this.rank, tag, movedArray(array, transfer));
  }

  /** See {@linkcode CommBackend.barrier}. */
  barrier(): Promise<void> {
    if (this.mailbox.error !== null) return Promise.reject(this.mailbox.error);
    const g = this.#group;
    const gen = ++this.#barrierCount;
    const arrived = (g.arrivals.get(gen) ?? 0) + 1;
    if (arrived === this.size) {
      g.arrivals.delete(gen);
      const waits = g.waits.get(gen) ?? [];
      g.waits.delete(gen);
      for (const w of waits) w.resolve();
      return Promise.resolve();
    }
    g.arrivals.set(gen, arrived);
    return new Promise<void>((resolve, reject) => {
      const list = g.waits.get(gen);
      if (list === undefined) g.waits.set(gen, [{ resolve, reject }]);
      else list.push({ resolve, reject });
    });
  }

  /** See {@linkcode CommBackend.broadcastControl}. */
  broadcastControl(message: ControlMessage): void {
    this.mailbox.throwIfFailed();
    const copy = structuredClone(message);
    for (const m of this.#group.members) {
      if (m !== this) queueMicrotask(() => controlTo(m, copy, this.rank));
    }
  }

  /** See {@linkcode CommBackend.abort}; peers abort with `rank <r>: <reason>`. */
  abort(reason: string): void {
    if (this.aborted || this.closed) return;
    this.abortLocal(String(reason));
    for (const m of this.#group.members) {
      if (m !== this) abortFrom(m, `rank ${this.rank}: ${reason}`);
    }
  }

  /** See {@linkcode CommBackend.close}. */
  close(): void {
    this.markClosed();
  }

  /** @ignore */
  protected override fail(error: CommAbortedError): void {
    super.fail(error);
    // Barrier waits are shared by the group: each rank rejects only its own,
    // which are the ones whose generation it has reached.
    const g = this.#group;
    const waits = g.waits.get(this.#barrierCount);
    if (waits !== undefined) {
      g.waits.delete(this.#barrierCount);
      for (const w of waits) w.reject(error);
    }
  }
}
