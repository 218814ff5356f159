// What every rank's CommBackend shares: its mailbox, its control handlers,
// its aborted and closed state, and the checked fronts of send, recv,
// discard and onControl. Not exported from the package.

import {
  CommAbortedError,
  type CommBackend,
  type ControlHandler,
  type ControlMessage,
  type LostRank,
  type SendOptions,
} from "./backend.ts";
import { checkData, checkPeer, checkTag, isThenable, movedArray } from "./_checks.ts";
import { Mailbox } from "./_mailbox.ts";

/**
 * @internal Base of the backends. A subclass sends to other ranks
 * (`sendArray`), delivers what arrives into `mailbox`, and runs its barrier,
 * control plane and `close` (through `markClosed`); a failure reaches every
 * pending receive through `fail`, which a subclass extends with its own waits.
 */
export abstract class RankBackend implements CommBackend {
  /** This rank. */
  abstract readonly rank: number;
  /** Ranks in the group. */
  abstract readonly size: number;
  /** Messages that arrived before their receive, and receives waiting for theirs. */
  protected readonly mailbox: Mailbox = new Mailbox();
  /** The control-message handlers. */
  protected readonly handlers: Set<ControlHandler> = new Set();
  /** Whether `close` ran. */
  protected closed = false;
  #aborted = false;

  /**
   * Whether this rank was aborted: here or by a peer (for a worker also by
   * the main thread, for an MPI rank also by a lost peer).
   */
  get aborted(): boolean {
    return this.#aborted;
  }

  /**
   * See {@linkcode CommBackend.send}. Checks `peer` and `tag`, then hands a
   * ready array over before returning (so a caller that blocks its thread
   * next does not hold the message back), a promised one once it resolves;
   * an array for this rank itself goes straight into its mailbox. Every
   * error comes back as a rejected promise.
   */
  send(
    peer: number,
    tag: string,
    data: Float32Array | PromiseLike<Float32Array>,
    options: SendOptions = {},
  ): Promise<void> {
    try {
      checkPeer(peer, this.size);
      checkTag(tag);
      const transfer = options.transfer === true;
      if (isThenable(data)) {
        return Promise.resolve(data).then((d) => this.#sendNow(peer, tag, d, transfer));
      }
      this.#sendNow(peer, tag, data, transfer);
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #sendNow(peer: number, tag: string, data: unknown, transfer: boolean): void {
    const array = checkData(data);
    this.mailbox.throwIfFailed();
    if (peer === this.rank) this.mailbox.deliver(peer, tag, movedArray(array, transfer));
    else this.sendArray(peer, tag, array, transfer);
  }

  /** Hands `array` for `peer` (another rank) to the transport; `transfer`: it may move its buffer. */
  protected abstract sendArray(
    peer: number,
    tag: string,
    array: Float32Array,
    transfer: boolean,
  ): void;

  /** See {@linkcode CommBackend.discard}. */
  discard(match: (tag: string) => boolean): number {
    return this.mailbox.discard(match);
  }

  /** See {@linkcode CommBackend.recv}: checks `peer` and `tag`, then waits with `take`. */
  recv(peer: number, tag: string): Promise<Float32Array> {
    try {
      checkPeer(peer, this.size);
      checkTag(tag);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.take(peer, tag);
  }

  /** The next message from `peer` (checked) under `tag`, from the mailbox. */
  protected take(peer: number, tag: string): Promise<Float32Array> {
    return this.mailbox.take(peer, tag);
  }

  /** See {@linkcode CommBackend.barrier}. */
  abstract barrier(): Promise<void>;

  /** See {@linkcode CommBackend.broadcastControl}. */
  abstract broadcastControl(message: ControlMessage): void;

  /** See {@linkcode CommBackend.onControl}. */
  onControl(handler: ControlHandler): () => void {
    if (typeof handler !== "function") {
      throw new TypeError(`control handler must be a function, got ${typeof handler}`);
    }
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /** See {@linkcode CommBackend.abort}. */
  abstract abort(reason: string): void;

  /** See {@linkcode CommBackend.close}. */
  abstract close(): void;

  /**
   * The first step of `close`: fails everything pending with "closed",
   * marks this rank closed and drops the control handlers. False when it
   * was closed already.
   */
  protected markClosed(): boolean {
    if (this.closed) return false;
    this.fail(new CommAbortedError("closed"));
    this.closed = true;
    this.handlers.clear();
    return true;
  }

  /** Aborts this rank alone (once, and not after `close`): everything pending fails with `reason`. */
  protected abortLocal(reason: string, lost?: LostRank): void {
    if (this.#aborted || this.closed) return;
    this.#aborted = true;
    this.fail(new CommAbortedError(reason, lost));
  }

  /** Rejects every waiting and later receive with `error`; subclasses add their own waits. */
  protected fail(error: CommAbortedError): void {
    this.mailbox.fail(error);
  }
}
