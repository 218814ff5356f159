// The main thread's end of a run's control plane: rendezvous (hello → go),
// heartbeats, error reports, aborts. Used by the worker pool; not exported
// from the package.

import { BroadcastChannel as NodeBroadcastChannel } from "node:worker_threads";
import type { ControlMessage } from "./backend.ts";
import { CHANNEL_PREFIX, type Envelope, isEnvelope, MAIN } from "./_envelope.ts";

// Deno 2.9 keeps one subscription per thread for all its BroadcastChannels;
// closing the last one ends it asynchronously, and a channel created before
// that has happened inherits the dying subscription and never works (its
// postMessage throws "expected i32"). So a new control plane waits until the
// last close has settled.
let settled: Promise<void> = Promise.resolve();

// The dying subscription ends when the event loop next polls its receive op;
// several turns of the loop (and a few ms) let that happen even when this
// thread was descheduled and a timer became due in the same turn.
async function settle(): Promise<void> {
  for (let i = 0; i < 4; i++) await new Promise<void>((resolve) => setTimeout(resolve, 0));
  await new Promise<void>((resolve) => setTimeout(resolve, 5));
}

/** Resolves once the last closed control plane has released its channel. */
export function controlPlaneSettled(): Promise<void> {
  return settled;
}

/** What the main thread hears from the ranks. */
export interface ControlPlaneEvents {
  /** A rank's heartbeat (also called for its hello). */
  onHeartbeat?(rank: number): void;
  /** A rank's error report. */
  onError?(rank: number, report: ControlMessage): void;
  /** A rank aborted the group. */
  onAbort?(rank: number, reason: string): void;
  /** A rank's user control message. */
  onControl?(message: ControlMessage, from: number): void;
}

/** Main-thread side of the BroadcastChannel named after the run. */
export class ControlPlane {
  readonly runId: string;
  readonly size: number;
  // node:worker_threads' BroadcastChannel: Deno's web one with ref()/unref(),
  // so that an idle group's channel does not keep the process alive.
  #channel: BroadcastChannel & { ref(): void; unref(): void };
  #hellos = new Set<number>();
  #helloWait: (() => void) | null = null;
  #events: ControlPlaneEvents;
  #closed = false;

  constructor(runId: string, size: number, events: ControlPlaneEvents = {}) {
    this.runId = runId;
    this.size = size;
    this.#events = events;
    this.#channel = new NodeBroadcastChannel(CHANNEL_PREFIX + runId) as unknown as
      & BroadcastChannel
      & { ref(): void; unref(): void };
    this.#channel.onmessage = (e: MessageEvent) => this.#on(e.data);
  }

  /** Resolves once every rank said hello, then tells them all to go. */
  rendezvous(): Promise<void> {
    return new Promise<void>((resolve) => {
      const check = () => {
        if (this.#hellos.size < this.size) return;
        this.#helloWait = null;
        this.#post({ c: "go", from: MAIN });
        resolve();
      };
      this.#helloWait = check;
      check();
    });
  }

  /** Lets the open channel keep the process alive (the default). */
  ref(): void {
    if (!this.#closed) this.#channel.ref();
  }

  /** Lets the process exit while the channel is open (nothing is awaited on it then). */
  unref(): void {
    if (!this.#closed) this.#channel.unref();
  }

  /** Ranks heard so far during rendezvous. */
  get ranksHeard(): number {
    return this.#hellos.size;
  }

  /** Aborts every rank with `reason`. */
  abort(reason: string): void {
    this.#post({ c: "abort", from: MAIN, reason });
  }

  /** Sends a user control message to every rank. */
  broadcast(message: ControlMessage): void {
    this.#post({ c: "user", from: MAIN, message });
  }

  /** Closes the channel; resolves once the thread's subscription has settled. */
  close(): Promise<void> {
    if (this.#closed) return settled;
    this.#closed = true;
    this.#channel.close();
    settled = settle();
    return settled;
  }

  #post(e: Envelope): void {
    if (!this.#closed) this.#channel.postMessage(e);
  }

  #on(e: unknown): void {
    if (!isEnvelope(e) || this.#closed || e.from === MAIN) return;
    switch (e.c) {
      case "hello":
        this.#hellos.add(e.from);
        this.#events.onHeartbeat?.(e.from);
        this.#helloWait?.();
        break;
      case "hb":
        this.#events.onHeartbeat?.(e.from);
        break;
      case "error":
        this.#events.onError?.(e.from, e.report);
        break;
      case "abort":
        this.#events.onAbort?.(e.from, e.reason);
        break;
      case "user":
        this.#events.onControl?.(e.message, e.from);
        break;
    }
  }
}
