// Message store shared by the backends: messages that arrive before their
// recv wait here, keyed by (peer, tag); recvs that come first wait for them.
// Not exported from the package.

import type { CommAbortedError } from "./backend.ts";

interface Waiter {
  resolve(data: Float32Array): void;
  reject(error: Error): void;
}

/** Buffered matching of messages to receives by (peer, tag), FIFO per key. */
export class Mailbox {
  #messages = new Map<string, Float32Array[]>();
  #waiters = new Map<string, Waiter[]>();
  #error: CommAbortedError | null = null;

  /** The error every receive gets once the mailbox failed, else null. */
  get error(): CommAbortedError | null {
    return this.#error;
  }

  /** Throws the mailbox's error once it failed. */
  throwIfFailed(): void {
    if (this.#error !== null) throw this.#error;
  }

  /** Hands a message to the oldest waiting receive, or keeps it. */
  deliver(peer: number, tag: string, data: Float32Array): void {
    if (this.#error !== null) return;
    const key = `${peer}|${tag}`;
    const waiting = this.#waiters.get(key);
    if (waiting !== undefined) {
      const w = waiting.shift()!;
      if (waiting.length === 0) this.#waiters.delete(key);
      w.resolve(data);
      return;
    }
    const queue = this.#messages.get(key);
    if (queue === undefined) this.#messages.set(key, [data]);
    else queue.push(data);
  }

  /** The next message from `peer` under `tag`, now or when it arrives. */
  take(peer: number, tag: string): Promise<Float32Array> {
    if (this.#error !== null) return Promise.reject(this.#error);
    const key = `${peer}|${tag}`;
    const queue = this.#messages.get(key);
    if (queue !== undefined) {
      const data = queue.shift()!;
      if (queue.length === 0) this.#messages.delete(key);
      return Promise.resolve(data);
    }
    return new Promise<Float32Array>((resolve, reject) => {
      const list = this.#waiters.get(key);
      if (list === undefined) this.#waiters.set(key, [{ resolve, reject }]);
      else list.push({ resolve, reject });
    });
  }

  /** Rejects every waiting and later receive with `error`; drops kept messages. */
  fail(error: CommAbortedError): void {
    if (this.#error !== null) return;
    this.#error = error;
    const waiters = [...this.#waiters.values()].flat();
    this.#waiters.clear();
    this.#messages.clear();
    for (const w of waiters) w.reject(error);
  }

  /**
   * Drops the kept messages and the waiting receives whose tag matches
   * (a dropped receive never settles: its caller has moved on). Returns how
   * many messages were dropped.
   */
  discard(match: (tag: string) => boolean): number {
    let n = 0;
    for (const [key, queue] of this.#messages) {
      if (match(key.slice(key.indexOf("|") + 1))) {
        n += queue.length;
        this.#messages.delete(key);
      }
    }
    for (const key of this.#waiters.keys()) {
      if (match(key.slice(key.indexOf("|") + 1))) this.#waiters.delete(key);
    }
    return n;
  }

  /** Messages kept for receives not yet called. */
  get bufferedCount(): number {
    let n = 0;
    for (const q of this.#messages.values()) n += q.length;
    return n;
  }
}
