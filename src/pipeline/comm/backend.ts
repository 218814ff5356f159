/**
 * The communication contract between pipeline ranks: point-to-point tensor
 * messages keyed by (peer, tag), a barrier, control messages and abort.
 *
 * @module
 */

/** A small structured-cloneable control message; `type` says what it is. */
export interface ControlMessage {
  /** What the message means to its receivers. */
  readonly type: string;
  /** Further fields (structured-cloneable values). */
  readonly [field: string]: unknown;
}

/** Receives control messages from other ranks. */
export type ControlHandler = (message: ControlMessage, from: number) => void;

/** Options of {@linkcode CommBackend.send}. */
export interface SendOptions {
  /**
   * Hand the array's buffer over instead of copying it (default false).
   * After a transferring send the caller must not touch the array again: its
   * buffer is detached. An array that views only part of its buffer is copied
   * first, so neighbouring data is never detached.
   */
  readonly transfer?: boolean;
}

/**
 * Point-to-point communication among the ranks of one pipeline group.
 *
 * Messages are matched by (peer, tag); a message may arrive before its
 * `recv` is called and is then kept until asked for. Two messages with the
 * same (peer, tag) are delivered in the order they were sent.
 *
 * @example
 * ```ts
 * import { type CommBackend, InProcessBackend } from "@conveyor/core/runtime";
 * const [a, b]: CommBackend[] = InProcessBackend.createGroup(2);
 * await a.send(1, "x", new Float32Array([1, 2]));
 * console.log(await b.recv(0, "x")); // Float32Array(2) [ 1, 2 ]
 * a.close();
 * b.close();
 * ```
 */
export interface CommBackend {
  /** This rank, 0 … size−1. */
  readonly rank: number;
  /** Number of ranks in the group. */
  readonly size: number;
  /** Whether `abort` was called here or by a peer. */
  readonly aborted: boolean;
  /**
   * Sends `data` to `peer` under `tag`. Never waits for the receiver: the
   * promise settles once the data is handed to the transport. `data` may be
   * a promise (e.g. a GPU read-back still in flight): the send then happens
   * when it resolves, while the caller goes on with its next action.
   * `peer` may be this rank itself (a local hand-over).
   */
  send(
    peer: number,
    tag: string,
    data: Float32Array | PromiseLike<Float32Array>,
    options?: SendOptions,
  ): Promise<void>;
  /** Resolves with the next message from `peer` under `tag`. */
  recv(peer: number, tag: string): Promise<Float32Array>;
  /**
   * Drops the messages kept here, and the receives waiting here, whose tag
   * matches (a dropped receive never settles): for traffic its sender and
   * receiver have both abandoned, e.g. a replayed iteration's first attempt.
   * Returns how many messages were dropped.
   */
  discard(match: (tag: string) => boolean): number;
  /** Resolves once every rank of the group has called `barrier` as often as this one. */
  barrier(): Promise<void>;
  /** Sends a control message to every other rank (not to this one). */
  broadcastControl(message: ControlMessage): void;
  /** Registers a control-message handler; returns a function that removes it. */
  onControl(handler: ControlHandler): () => void;
  /**
   * Aborts communication here and tells the peers: every pending and later
   * `recv`, `send` and `barrier` rejects with a {@linkcode CommAbortedError}
   * naming `reason`.
   */
  abort(reason: string): void;
  /** Releases the transport; pending receives reject. Idempotent. */
  close(): void;
  /**
   * Optional: `describe` says, when called, what this rank is doing (e.g.
   * "computing 1F3 (stage 1, microBatch 3, iteration 5)"); null forgets it.
   * A transport that can lose a peer's process (MPI) sends the latest
   * description with its heartbeats and quotes it when this rank is lost;
   * others need not implement it.
   */
  reportActivity?(describe: (() => string) | null): void;
}

/** A peer whose process the transport saw end or go silent (see {@linkcode CommAbortedError.lost}). */
export interface LostRank {
  /** The lost rank. */
  readonly rank: number;
  /** What was seen, e.g. "its process 4242 on host-a has ended", and its last activity. */
  readonly why: string;
}

/**
 * Raised by every pending or later operation of an aborted or closed
 * {@linkcode CommBackend}; the message names the reason.
 *
 * @example
 * ```ts
 * import { CommAbortedError } from "@conveyor/core/runtime";
 * const e = new CommAbortedError("rank 2 failed");
 * console.log(e.message); // "communication aborted: rank 2 failed"
 * ```
 */
export class CommAbortedError extends Error {
  /** The reason given to `abort` (or `"closed"`). */
  readonly reason: string;
  /** Set when the abort is the loss of a peer's process (MPI): which rank, and what was seen. */
  readonly lost?: LostRank;

  /** Creates the error for `reason`, and the lost peer where that is the cause. */
  constructor(reason: string, lost?: LostRank) {
    super(`communication aborted: ${reason}`);
    this.name = "CommAbortedError";
    this.reason = reason;
    if (lost !== undefined) this.lost = lost;
  }
}
