// The MPI backend's progress engine: every nonblocking MPI operation of a
// rank, and the loop that polls MPI from the event loop. Used by
// mpi_backend.ts only.
//
// Polling: MPI_Improbe takes in each arriving envelope, MPI_Test completes
// pending requests. The pump polls without pause for `pollSpinUs` after
// traffic, then with pauses growing from POLL_MIN_US to `pollMaxUs` while
// anything is pending, and every `idlePollMs` otherwise; no thread ever
// waits inside MPI. `drainSync` polls synchronously (for close).

import { setImmediate } from "node:timers";
import {
  ANY_SOURCE,
  check,
  errorString,
  type LibcSymbols,
  type MpiSymbols,
  STATUS_BYTES,
} from "./_mpi_ffi.ts";
import { ENVELOPE_TAG, offHeapBytes } from "./_mpi_wire.ts";
import { POLL_MIN_US, type Settings } from "./_mpi_settings.ts";

interface Op {
  readonly req: BigUint64Array;
  /** Keeps the buffer alive (and in place) until MPI is done with it. */
  readonly keep: ArrayBufferView;
  readonly peer: number;
  readonly what: string;
  readonly done: () => void;
}

/** What the engine asks of its backend. */
export interface EngineHooks {
  /** Runs before every poll (e.g. to look for ended peers). */
  beforePoll(): void;
  /**
   * An envelope from `src` was found and its receive posted: returns what
   * to do once its bytes are in (called in the order envelopes are found).
   */
  onEnvelope(src: number): (bytes: Uint8Array) => void;
  /** Whether the backend waits for something (so the pump polls fast). */
  waiting(): boolean;
  /** The pump failed (an MPI call returned an error). */
  onFailure(error: Error): void;
}

// Spare buffers: at most this many per size and bytes in all, of at least SPARE_MIN bytes.
const SPARE_PER_SIZE = 4;
const SPARE_MAX_BYTES = 256 << 20;
const SPARE_MIN = 64 << 10;
const noop = (): void => {};

const immediate = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/** One rank's MPI operations on its communicator, and their polling. */
export class MpiEngine {
  /** Set once this rank makes no MPI call any more (lost peer, failure, closed). */
  stopped = false;

  #mpi: MpiSymbols;
  #libc: LibcSymbols;
  #comm: Deno.PointerObject;
  #settings: Settings;
  #hooks: EngineHooks;
  #ops = new Set<Op>();
  // Buffers of this rank's sent tensors, its own once MPI is done with them,
  // reused for receives of the same size: MPI writes a fresh 16 MiB array
  // through 4096 page faults (about 1 ms), a reused one through none.
  #spare = new Map<number, ArrayBuffer[]>();
  #spareBytes = 0;
  #pumping = false;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #idleWake: (() => void) | null = null;
  // MPI out-parameters, reused call after call (MPI does not keep them).
  #flag = new Int32Array(1);
  #count = new Int32Array(1);
  #message = new BigUint64Array(1);
  #status = new Uint8Array(new ArrayBuffer(STATUS_BYTES));
  #statusInts = new Int32Array(this.#status.buffer);

  constructor(
    mpi: MpiSymbols,
    libc: LibcSymbols,
    comm: Deno.PointerObject,
    settings: Settings,
    hooks: EngineHooks,
  ) {
    this.#mpi = mpi;
    this.#libc = libc;
    this.#comm = comm;
    this.#settings = settings;
    this.#hooks = hooks;
  }

  /** Operations MPI has not completed yet. */
  get pending(): number {
    return this.#ops.size;
  }

  /** Starts the polling loop (once; it ends when `stopped`). */
  startPump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    this.#pump().catch((e) => this.#hooks.onFailure(e as Error)).finally(() =>
      this.#pumping = false
    );
  }

  async #pump(): Promise<void> {
    let us = 0;
    let lastActivity = performance.now();
    const spinMs = this.#settings.pollSpinUs / 1000;
    while (!this.stopped) {
      const progressed = this.progress();
      if (this.stopped) return;
      if (progressed) {
        us = 0;
        lastActivity = performance.now();
        await immediate();
      } else if (this.#busy() && performance.now() - lastActivity < spinMs) {
        await immediate(); // a reply, or the next step of a large message, is due soon
      } else if (this.#busy()) {
        us = us === 0 ? POLL_MIN_US : Math.min(2 * us, this.#settings.pollMaxUs);
        await this.#libc.usleep(us);
      } else {
        us = 0;
        await new Promise<void>((resolve) => {
          this.#idleWake = resolve;
          const timer = setTimeout(() => {
            this.#idleWake = null;
            resolve();
          }, this.#settings.idlePollMs);
          Deno.unrefTimer(timer);
          this.#idleTimer = timer;
        });
      }
    }
  }

  /** Ends an idle wait at once (new work that should be polled for). */
  kick(): void {
    const wake = this.#idleWake;
    if (wake === null) return;
    this.#idleWake = null;
    clearTimeout(this.#idleTimer);
    wake();
  }

  #busy(): boolean {
    return this.#ops.size > 0 || this.#hooks.waiting();
  }

  /**
   * One round: take every envelope that has arrived, test every pending
   * request. Returns whether anything happened. Re-entrant: a hook it calls
   * may close the backend (which polls too).
   */
  progress(): boolean {
    this.#hooks.beforePoll();
    const mpi = this.#mpi;
    const flag = this.#flag;
    let any = false;
    // Open MPI's MPI_Improbe looks at the messages already taken in and only
    // then runs the progress engine that takes in new ones: ask until two
    // calls in a row find nothing, or a message that arrived just now waits
    // for the next poll.
    for (let misses = 0; misses < 2 && !this.stopped;) {
      check(
        mpi,
        mpi.MPI_Improbe(ANY_SOURCE, ENVELOPE_TAG, this.#comm, flag, this.#message, this.#status),
        "MPI_Improbe",
      );
      if (flag[0] === 0) {
        misses++;
        continue;
      }
      misses = 0;
      any = true;
      const src = this.#statusInts[0];
      check(
        mpi,
        mpi.MPI_Get_count(this.#status, mpi.ompi_mpi_byte, this.#count),
        "MPI_Get_count",
      );
      const bytes = offHeapBytes(this.#count[0]);
      const arrived = this.#hooks.onEnvelope(src);
      const req = new BigUint64Array(1);
      check(
        mpi,
        mpi.MPI_Imrecv(bytes, bytes.length, mpi.ompi_mpi_byte, this.#message, req),
        "MPI_Imrecv",
      );
      this.#ops.add({
        req,
        keep: bytes,
        peer: src,
        what: "envelope receive",
        done: () => arrived(bytes),
      });
    }
    // Ops added while iterating (payload receives) are tested in this round too.
    for (const op of this.#ops) {
      if (this.stopped) break;
      const code = mpi.MPI_Test(op.req, flag, this.#status);
      if (code !== 0) {
        this.#ops.delete(op);
        throw new Error(
          `MPI_Test (${op.what}, rank ${op.peer}) failed: ${errorString(mpi, code)} (code ${code})`,
        );
      }
      if (flag[0] !== 0) {
        this.#ops.delete(op);
        any = true;
        op.done();
      }
    }
    return any;
  }

  /** MPI_Isend of `data` (bytes or floats) to `peer` on MPI tag `tag`. */
  isend(
    peer: number,
    data: Uint8Array | Float32Array,
    tag: number,
    what: string,
    done: () => void = noop,
  ): void {
    const mpi = this.#mpi;
    const type = data instanceof Float32Array ? mpi.ompi_mpi_float : mpi.ompi_mpi_byte;
    const req = new BigUint64Array(1);
    check(mpi, mpi.MPI_Isend(data, data.length, type, peer, tag, this.#comm, req), "MPI_Isend");
    this.#ops.add({ req, keep: data, peer, what: `${what} send`, done });
  }

  /** Sends a tensor payload; its buffer is kept for a later receive of the same size. */
  sendTensor(peer: number, data: Float32Array, tag: number): void {
    this.isend(peer, data, tag, "tensor", () => this.#recycle(data));
  }

  /** Posts the receive of `count` floats from `src` on MPI tag `tag`; `done` gets the array. */
  receiveTensor(src: number, count: number, tag: number, done: (data: Float32Array) => void): void {
    const data = this.#receiveArray(count);
    const mpi = this.#mpi;
    const req = new BigUint64Array(1);
    check(
      mpi,
      mpi.MPI_Irecv(data, count, mpi.ompi_mpi_float, src, tag, this.#comm, req),
      "MPI_Irecv",
    );
    this.#ops.add({ req, keep: data, peer: src, what: "tensor receive", done: () => done(data) });
  }

  #recycle(a: Float32Array): void {
    const buffer = a.buffer;
    const bytes = a.byteLength;
    if (!(buffer instanceof ArrayBuffer) || bytes < SPARE_MIN || buffer.byteLength !== bytes) {
      return;
    }
    const list = this.#spare.get(bytes) ?? [];
    if (list.length >= SPARE_PER_SIZE || this.#spareBytes + bytes > SPARE_MAX_BYTES) return;
    list.push(buffer);
    this.#spare.set(bytes, list);
    this.#spareBytes += bytes;
  }

  // A new array of `count` floats for MPI to write: a spare buffer or a fresh one.
  #receiveArray(count: number): Float32Array {
    const spare = this.#spare.get(count * 4)?.pop();
    if (spare === undefined) return new Float32Array(new ArrayBuffer(count * 4));
    this.#spareBytes -= spare.byteLength;
    return new Float32Array(spare);
  }

  /**
   * Polls synchronously (MPI_Test, then a short sleep) until `quit()` after
   * a poll, or no operation is pending and `done()`, or `timeoutMs` passed.
   */
  drainSync(quit: () => boolean, done: () => boolean, timeoutMs: number): void {
    const start = performance.now();
    let us = POLL_MIN_US;
    for (;;) {
      const progressed = this.progress();
      if (quit()) return;
      if (this.#ops.size === 0 && done()) return;
      if (performance.now() - start > timeoutMs) return;
      us = progressed ? POLL_MIN_US : Math.min(2 * us, this.#settings.pollMaxUs);
      this.#libc.usleepSync(us);
    }
  }

  /** Drops the spare buffers (the engine is done). */
  release(): void {
    this.#spare.clear();
  }
}
