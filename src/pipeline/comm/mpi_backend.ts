/**
 * A {@linkcode CommBackend} whose ranks are MPI processes: Open MPI's libmpi
 * called through Deno FFI, one process per rank, started by `mpirun`.
 *
 * - Data plane: nonblocking MPI point-to-point on the arrays themselves. A
 *   transferring send hands its buffer to MPI without a copy (the caller's
 *   array is detached, as with a worker transfer); a receive lands in a fresh
 *   array of exactly the announced size. String tags travel in a small
 *   envelope before each payload (see `_mpi_wire.ts` for the mapping).
 * - Progress: MPI is polled with MPI_Improbe / MPI_Test from the event loop:
 *   without pause for `pollSpinUs` (200 µs) after traffic, then with pauses
 *   growing from 25 µs to `pollMaxUs` (1 ms) while anything is pending, and
 *   every `idlePollMs` (10 ms) otherwise. No thread ever waits inside MPI,
 *   so a waiting rank does not spin a core (`bench/transport_bench.ts`
 *   measures latency and CPU).
 * - Control plane on the same channel: barrier, control messages, abort,
 *   error reports, heartbeats, peer-loss reports and a closing handshake.
 * - Failure: a peer process that has ended (same host: seen through a pidfd
 *   before every MPI call; elsewhere: silent for `peerTimeoutMs`) aborts
 *   every rank with `rank <r> lost: …`; each survivor prints that to stderr
 *   and makes no MPI call any more (Open MPI 4 ends a process whose read of
 *   a dead peer's data fails). When mpirun ends the job itself (its default
 *   when a rank dies), each survivor prints the lost rank on SIGTERM and
 *   exits with status 143. Over TCP, Open MPI itself may end a survivor
 *   first, when its connection to the dead rank breaks; mpirun names the
 *   lost rank then.
 *
 * Run ranks with `mpirun -n <ranks> deno run --allow-ffi script.ts` (as
 * root add `--allow-run-as-root`, with more ranks than cores
 * `--oversubscribe`). libmpi is `libmpi.so.40` or the path in
 * `CONVEYOR_LIBMPI`.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import {
  CommAbortedError,
  type CommBackend,
  type ControlHandler,
  type ControlMessage,
  type SendOptions,
} from "./backend.ts";
import {
  addControlHandler,
  checkData,
  checkedSend,
  checkPeer,
  checkTag,
  movedArray,
} from "./_checks.ts";
import { Mailbox } from "./_mailbox.ts";
import {
  ANY_SOURCE,
  check,
  checkFfiPermission,
  errorString,
  hostname,
  KEYVAL_TAG_UB,
  launchedByMpirun,
  type LibcSymbols,
  MpiSetupError,
  type MpiSymbols,
  openLibc,
  openLibmpi,
  ProcessWatch,
  STATUS_BYTES,
  THREAD_SERIALIZED,
} from "./_mpi_ffi.ts";
import {
  type ControlEnvelope,
  decodeEnvelope,
  encodeControl,
  encodeTensor,
  ENVELOPE_TAG,
  offHeapBytes,
  PAYLOAD_TAG_MIN,
} from "./_mpi_wire.ts";

export { MpiSetupError } from "./_mpi_ffi.ts";

/** Options of {@linkcode MpiBackend.init}. */
export interface MpiBackendOptions {
  /** libmpi to load (default: `CONVEYOR_LIBMPI`, else `libmpi.so.40` and the usual paths). */
  readonly libraryPath?: string;
  /**
   * Heartbeat period in ms (default 1000; 0 turns heartbeats and liveness
   * checks off, leaving mpirun's SIGTERM as the only news of a dead peer).
   * Every period each rank sends a small message to each peer; a peer on
   * another host is lost after `peerTimeoutMs` of silence. A peer on this
   * host is checked before every MPI call (a pidfd, one poll(2)) and is
   * lost as soon as its process has ended.
   */
  readonly heartbeatIntervalMs?: number;
  /**
   * Silence after which a peer on another host counts as lost, in ms
   * (default 15 000). A rank is silent while it computes synchronously, so
   * this must exceed the longest synchronous stretch of any rank.
   */
  readonly peerTimeoutMs?: number;
  /**
   * Longest pause between two polls while an operation is pending, in µs
   * (default 1000). Pauses grow from 25 µs to this; a message that comes
   * after a long wait is taken in up to this much later. Lower costs more
   * CPU while waiting (`deno run -A bench/transport_bench.ts --poll-sweep`).
   */
  readonly pollMaxUs?: number;
  /**
   * After traffic, keep polling without pausing for this long, in µs
   * (default 200; 0 turns it off): a reply, or the next step of a large
   * message's handshake, usually comes within it. It runs only right after
   * traffic and only while this thread has nothing else to do.
   */
  readonly pollSpinUs?: number;
  /** Poll period when nothing is pending, in ms (default 10). */
  readonly idlePollMs?: number;
  /** How long `init` waits for every rank's hello, in ms (default 60 000). */
  readonly connectTimeoutMs?: number;
  /**
   * How long `close` keeps draining (finishing this rank's sends, receiving
   * and dropping what peers still send, until every peer has closed too)
   * before it finalises MPI anyway, in ms (default 10 000).
   */
  readonly closeTimeoutMs?: number;
  /**
   * On SIGTERM (what mpirun sends when it ends a job, e.g. after a rank
   * died) print which peers were lost and exit with status 143 (default
   * true). Set false to handle SIGTERM yourself.
   */
  readonly handleSigterm?: boolean;
}

interface Settings {
  readonly heartbeatIntervalMs: number;
  readonly peerTimeoutMs: number;
  readonly pollMaxUs: number;
  readonly pollSpinUs: number;
  readonly idlePollMs: number;
  readonly connectTimeoutMs: number;
  readonly closeTimeoutMs: number;
  readonly handleSigterm: boolean;
}

interface Op {
  readonly req: BigUint64Array;
  /** Keeps the buffer alive (and in place) until MPI is done with it. */
  readonly keep: ArrayBufferView;
  readonly peer: number;
  readonly what: string;
  readonly done: () => void;
}

// One incoming envelope, processed in the order the peer sent it.
interface Slot {
  ready: boolean;
  apply: () => void;
}

interface Peer {
  pid: number;
  host: string;
  hello: boolean;
  lastHeard: number;
  closed: boolean;
  lost: boolean;
  queue: Slot[];
  nextPayloadTag: number;
  gone: PromiseWithResolvers<never>;
}

const POLL_MIN_US = 25;
// Spare buffers: at most this many per size and bytes in all, of at least SPARE_MIN bytes.
const SPARE_PER_SIZE = 4;
const SPARE_MAX_BYTES = 256 << 20;
const SPARE_MIN = 64 << 10;
const noop = (): void => {};

// One backend per process: MPI starts once and cannot start again.
let openBackend: MpiBackend | null = null;
let starting = false;
let mpiStarted = false;

function optionMs(
  options: MpiBackendOptions,
  key: keyof MpiBackendOptions,
  fallback: number,
  min: number,
): number {
  const v = options[key] ?? fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min) {
    throw new RangeError(`${key} must be a number >= ${min}, got ${v}`);
  }
  return v;
}

const immediate = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/**
 * One rank of an MPI job. Create it with {@linkcode MpiBackend.init} in every
 * process of `mpirun -n <ranks> deno run --allow-ffi script.ts`; rank and size
 * come from MPI_COMM_WORLD. `close()` finalises MPI once every peer has
 * closed (or `closeTimeoutMs` passed), after which the process exits by
 * itself with status 0.
 *
 * @example
 * ```ts ignore
 * // mpirun -n 2 deno run --allow-ffi ping.ts
 * import { MpiBackend } from "@conveyor/core/runtime";
 * const comm = await MpiBackend.init();
 * try {
 *   if (comm.rank === 0) await comm.send(1, "x", new Float32Array([1, 2]), { transfer: true });
 *   else console.log(await comm.recv(0, "x")); // Float32Array(2) [ 1, 2 ]
 * } finally {
 *   comm.close();
 * }
 * ```
 */
export class MpiBackend implements CommBackend {
  /**
   * Loads libmpi, initialises MPI (MPI_THREAD_SERIALIZED), duplicates
   * MPI_COMM_WORLD for this backend's traffic and resolves once every rank
   * has said hello. Throws an {@linkcode MpiSetupError} with a one-line
   * explanation when FFI permission is missing, libmpi is not found, the
   * process was not started by mpirun, or MPI already ran in this process;
   * a RangeError for a bad option.
   *
   * @example
   * ```ts ignore
   * import { MpiBackend } from "@conveyor/core/runtime";
   * const comm = await MpiBackend.init({ heartbeatIntervalMs: 500 });
   * console.log(`rank ${comm.rank} of ${comm.size}`);
   * comm.close();
   * ```
   */
  static async init(options: MpiBackendOptions = {}): Promise<MpiBackend> {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`options must be an object, got ${options}`);
    }
    const settings: Settings = {
      heartbeatIntervalMs: optionMs(options, "heartbeatIntervalMs", 1000, 0),
      peerTimeoutMs: optionMs(options, "peerTimeoutMs", 15_000, 1),
      pollMaxUs: optionMs(options, "pollMaxUs", 1000, POLL_MIN_US),
      pollSpinUs: optionMs(options, "pollSpinUs", 200, 0),
      idlePollMs: optionMs(options, "idlePollMs", 10, 1),
      connectTimeoutMs: optionMs(options, "connectTimeoutMs", 60_000, 1),
      closeTimeoutMs: optionMs(options, "closeTimeoutMs", 10_000, 0),
      handleSigterm: options.handleSigterm ?? true,
    };
    checkFfiPermission();
    if (starting) throw new MpiSetupError("MpiBackend.init is already running in this process");
    if (openBackend !== null) {
      throw new MpiSetupError(
        `an MpiBackend is already open in this process (rank ${openBackend.rank}): close it first`,
      );
    }
    if (mpiStarted) {
      throw new MpiSetupError(
        "MPI already ran and ended in this process and cannot start again: one MpiBackend per process",
      );
    }
    starting = true;
    try {
      return await MpiBackend.#start(options, settings);
    } finally {
      starting = false;
    }
  }

  static async #start(options: MpiBackendOptions, settings: Settings): Promise<MpiBackend> {
    const lib = openLibmpi(
      options.libraryPath === undefined ? {} : { path: options.libraryPath },
    );
    if (!launchedByMpirun()) {
      throw new MpiSetupError(
        "not launched under mpirun (OMPI_COMM_WORLD_SIZE and PMIX_RANK are unset): " +
          "run under mpirun, e.g. mpirun -n 2 deno run --allow-ffi script.ts",
      );
    }
    const mpi = lib.symbols;
    const flag = new Int32Array(1);
    check(mpi, mpi.MPI_Finalized(flag), "MPI_Finalized");
    if (flag[0] !== 0) {
      throw new MpiSetupError("MPI was finalised in this process and cannot start again");
    }
    check(mpi, mpi.MPI_Initialized(flag), "MPI_Initialized");
    const ownsMpi = flag[0] === 0;
    if (ownsMpi) {
      const provided = new Int32Array(1);
      check(mpi, mpi.MPI_Init_thread(null, null, THREAD_SERIALIZED, provided), "MPI_Init_thread");
    }
    mpiStarted = true;
    const world = mpi.ompi_mpi_comm_world;
    const out = new Int32Array(1);
    check(mpi, mpi.MPI_Comm_rank(world, out), "MPI_Comm_rank");
    const rank = out[0];
    check(mpi, mpi.MPI_Comm_size(world, out), "MPI_Comm_size");
    const size = out[0];
    const attr = new BigUint64Array(1);
    check(mpi, mpi.MPI_Comm_get_attr(world, KEYVAL_TAG_UB, attr, flag), "MPI_Comm_get_attr");
    const tagUb = flag[0] !== 0
      ? new Deno.UnsafePointerView(Deno.UnsafePointer.create(attr[0])!).getInt32()
      : 32767;
    // Our own communicator: no other MPI user of this process can match our
    // messages, and its errors come back as codes instead of aborting.
    const dup = new BigUint64Array(new ArrayBuffer(8));
    const req = new BigUint64Array(new ArrayBuffer(8));
    check(mpi, mpi.MPI_Comm_idup(world, dup, req), "MPI_Comm_idup");
    const libc = openLibc();
    const status = new Uint8Array(STATUS_BYTES);
    for (let us = POLL_MIN_US;; us = Math.min(2 * us, 1000)) {
      check(mpi, mpi.MPI_Test(req, flag, status), "MPI_Test (MPI_Comm_idup)");
      if (flag[0] !== 0) break;
      await libc.usleep(us);
    }
    const comm = Deno.UnsafePointer.create(dup[0])!;
    check(
      mpi,
      mpi.MPI_Comm_set_errhandler(comm, mpi.ompi_mpi_errors_return),
      "MPI_Comm_set_errhandler",
    );
    const backend = new MpiBackend(mpi, libc, comm, rank, size, tagUb, ownsMpi, lib.path, settings);
    openBackend = backend;
    await backend.#connect();
    return backend;
  }

  /** This rank (in MPI_COMM_WORLD). */
  readonly rank: number;
  /** Ranks in the job. */
  readonly size: number;
  /** The libmpi that was loaded (a path or soname). */
  readonly library: string;
  /** MPI_TAG_UB of this MPI: payload tags cycle below it. */
  readonly tagUpperBound: number;

  #mpi: MpiSymbols;
  #libc: LibcSymbols;
  #comm: Deno.PointerObject;
  #ownsMpi: boolean;
  #settings: Settings;
  #host = hostname();
  #peers: Peer[];
  #watch = new ProcessWatch();
  #mailbox = new Mailbox();
  #handlers = new Set<ControlHandler>();
  #ops = new Set<Op>();
  // Buffers of this rank's sent tensors, its own once MPI is done with them,
  // reused for receives of the same size: MPI writes a fresh 16 MiB array
  // through 4096 page faults (about 1 ms), a reused one through none.
  #spare = new Map<number, ArrayBuffer[]>();
  #spareBytes = 0;
  #queued = 0;
  #recvWaiting = 0;
  #barrierCount = 0;
  #barrierArrivals = new Map<number, Set<number>>();
  #barrierWaits = new Map<number, { resolve(): void; reject(e: Error): void }>();
  #helloWait: (() => void) | null = null;
  #closed = false;
  #aborted = false;
  #stopped = false;
  #noFinalize = false;
  #pumping = false;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #idleWake: (() => void) | null = null;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  // MPI out-parameters, reused call after call (MPI does not keep them).
  #flag = new Int32Array(1);
  #count = new Int32Array(1);
  #message = new BigUint64Array(1);
  #status = new Uint8Array(new ArrayBuffer(STATUS_BYTES));
  #statusInts = new Int32Array(this.#status.buffer);

  private constructor(
    mpi: MpiSymbols,
    libc: LibcSymbols,
    comm: Deno.PointerObject,
    rank: number,
    size: number,
    tagUb: number,
    ownsMpi: boolean,
    library: string,
    settings: Settings,
  ) {
    this.#mpi = mpi;
    this.#libc = libc;
    this.#comm = comm;
    this.rank = rank;
    this.size = size;
    this.tagUpperBound = tagUb;
    this.#ownsMpi = ownsMpi;
    this.library = library;
    this.#settings = settings;
    const now = performance.now();
    this.#peers = Array.from({ length: size }, (_, q) => {
      const gone = Promise.withResolvers<never>();
      gone.promise.catch(noop);
      return {
        pid: q === rank ? Deno.pid : 0,
        host: q === rank ? this.#host : "",
        hello: q === rank,
        lastHeard: now,
        closed: false,
        lost: false,
        queue: [],
        nextPayloadTag: PAYLOAD_TAG_MIN,
        gone,
      };
    });
  }

  /** Whether this rank was aborted (here or by a peer, or a peer was lost). */
  get aborted(): boolean {
    return this.#aborted;
  }

  /**
   * See {@linkcode CommBackend.send}. A ready array is handed to MPI before
   * this returns (MPI_Isend of an envelope, then of the array). With
   * `transfer: true` MPI sends the caller's own buffer, which is detached
   * (no copy); otherwise a copy is sent and the caller keeps its array.
   */
  send(
    peer: number,
    tag: string,
    data: Float32Array | PromiseLike<Float32Array>,
    options: SendOptions = {},
  ): Promise<void> {
    return checkedSend(this.size, peer, tag, data, options, this.#sendNow.bind(this));
  }

  #sendNow(peer: number, tag: string, data: unknown, transfer: boolean): void {
    const array = checkData(data);
    this.#mailbox.throwIfFailed();
    if (peer === this.rank) {
      this.#mailbox.deliver(peer, tag, movedArray(array, transfer));
      return;
    }
    const p = this.#peers[peer];
    if (p.closed) throw new CommAbortedError(`rank ${peer} closed`);
    if (array.length > 0x7fffffff) {
      throw new RangeError(`data must hold at most 2147483647 floats, got ${array.length}`);
    }
    const owned = movedArray(array, transfer);
    void owned.buffer; // a small array moves off the V8 heap, where MPI may read it later
    const payloadTag = p.nextPayloadTag;
    p.nextPayloadTag = payloadTag >= this.tagUpperBound ? PAYLOAD_TAG_MIN : payloadTag + 1;
    this.#isend(peer, encodeTensor(tag, owned.length, payloadTag), ENVELOPE_TAG, "envelope");
    if (owned.length > 0) {
      this.#isend(peer, owned, payloadTag, "tensor", () => this.#recycle(owned));
    }
    this.#kick();
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

  /** See {@linkcode CommBackend.discard}. */
  discard(match: (tag: string) => boolean): number {
    return this.#mailbox.discard(match);
  }

  /** See {@linkcode CommBackend.recv}. Rejects if `peer` has closed and sent nothing more. */
  recv(peer: number, tag: string): Promise<Float32Array> {
    try {
      checkPeer(peer, this.size);
      checkTag(tag);
    } catch (e) {
      return Promise.reject(e);
    }
    const taken = this.#mailbox.take(peer, tag);
    if (peer === this.rank) return taken;
    // A message already kept wins the race (it settled first).
    const result = Promise.race([taken, this.#peers[peer].gone.promise]);
    this.#recvWaiting++;
    const settle = () => void this.#recvWaiting--;
    result.then(settle, settle);
    this.#kick();
    return result;
  }

  /** See {@linkcode CommBackend.barrier}; point-to-point messages, not MPI_Barrier. */
  barrier(): Promise<void> {
    if (this.#mailbox.error !== null) return Promise.reject(this.#mailbox.error);
    const gen = ++this.#barrierCount;
    const arrived = this.#barrierArrivals.get(gen);
    const closed = this.#peers.findIndex((p, q) => p.closed && !arrived?.has(q));
    if (closed >= 0) return Promise.reject(new CommAbortedError(`rank ${closed} closed`));
    try {
      this.#broadcast({ c: "barrier", gen });
    } catch (e) {
      return Promise.reject(e);
    }
    if ((this.#barrierArrivals.get(gen)?.size ?? 0) === this.size - 1) {
      this.#barrierArrivals.delete(gen);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      this.#barrierWaits.set(gen, { resolve, reject });
      this.#kick();
    });
  }

  /**
   * See {@linkcode CommBackend.broadcastControl}. The message is
   * serialised with the structured-clone algorithm (node:v8); a message
   * that cannot be cloned throws a TypeError.
   */
  broadcastControl(message: ControlMessage): void {
    this.#mailbox.throwIfFailed();
    this.#broadcast({ c: "user", message });
  }

  /** See {@linkcode CommBackend.onControl}. */
  onControl(handler: ControlHandler): () => void {
    return addControlHandler(this.#handlers, handler);
  }

  /** See {@linkcode CommBackend.abort}; peers abort with `rank <r>: <reason>`. */
  abort(reason: string): void {
    if (this.#aborted || this.#closed) return;
    this.#broadcast({ c: "abort", reason: String(reason) }, true);
    this.#abortLocal(String(reason));
  }

  /**
   * Tells every peer that this rank failed (they abort with
   * `rank <r> failed: <report.message>`) and aborts this rank.
   *
   * @example
   * ```ts ignore
   * try {
   *   await step();
   * } catch (e) {
   *   comm.reportError({ type: "error", message: String(e) });
   *   throw e;
   * }
   * ```
   */
  reportError(report: ControlMessage): void {
    if (this.#aborted || this.#closed) return;
    this.#broadcast({ c: "error", report }, true);
    this.#abortLocal(`rank ${this.rank} failed`);
  }

  /**
   * Rejects pending receives, tells the peers this rank is closing, then
   * drains (this rank's sends complete; what peers still send is received
   * and dropped) until every peer has closed or `closeTimeoutMs` passed, and
   * finalises MPI. After a lost peer or an MPI failure MPI is not finalised
   * (its final synchronisation would wait for the dead): the process exits
   * without it and mpirun reports the job as failed. Idempotent; also runs
   * on the process's `unload` event.
   */
  close(): void {
    if (this.#closed) return;
    this.#fail(new CommAbortedError("closed"));
    this.#closed = true;
    this.#handlers.clear();
    clearInterval(this.#heartbeat);
    this.#removeListeners();
    this.#kick();
    try {
      if (!this.#noFinalize) {
        this.#broadcast({ c: "bye" }, true);
        this.#drain();
      }
    } catch (e) {
      this.#noFinalize = true;
      console.error(
        `conveyor: rank ${this.rank}: MPI failed while closing: ${(e as Error).message}`,
      );
    }
    this.#stopped = true;
    this.#watch.clear();
    this.#spare.clear();
    openBackend = null;
    if (this.#noFinalize || !this.#ownsMpi) return;
    const code = this.#mpi.MPI_Finalize();
    if (code !== 0) {
      console.error(
        `conveyor: rank ${this.rank}: MPI_Finalize failed: ${errorString(this.#mpi, code)}`,
      );
    }
  }

  // --- lifecycle ---------------------------------------------------------

  async #connect(): Promise<void> {
    this.#startPump();
    const hello: ControlEnvelope = { c: "hello", pid: Deno.pid, host: this.#host };
    try {
      this.#broadcast(hello);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.#helloWait = null;
          const missing = this.#peers.flatMap((p, q) => p.hello ? [] : [q]);
          reject(
            new MpiSetupError(
              `rank ${this.rank}: no hello from rank(s) ${missing.join(", ")} within ` +
                `${this.#settings.connectTimeoutMs} ms`,
            ),
          );
        }, this.#settings.connectTimeoutMs);
        this.#helloWait = () => {
          if (!this.#peers.every((p) => p.hello)) return;
          clearTimeout(timer);
          this.#helloWait = null;
          resolve();
        };
        this.#helloWait();
      });
    } catch (e) {
      this.#noFinalize = true;
      this.close();
      throw e;
    }
    if (this.#settings.heartbeatIntervalMs > 0) {
      const timer = setInterval(() => this.#beat(), this.#settings.heartbeatIntervalMs);
      Deno.unrefTimer(timer);
      this.#heartbeat = timer;
    }
    if (this.#settings.handleSigterm) {
      try {
        Deno.addSignalListener("SIGTERM", this.#onSigterm);
      } catch {
        // No SIGTERM on this platform.
      }
    }
    globalThis.addEventListener("unload", this.#onUnload);
  }

  #onUnload = (): void => this.close();

  #onSigterm = (): void => {
    this.#noFinalize = true;
    const lost = this.#findLost(true);
    const what = lost.length > 0
      ? lost.map(([q, why]) => `lost rank ${q} (${why})`).join("; ")
      : "no peer found lost";
    console.error(`conveyor: rank ${this.rank}: SIGTERM (mpirun is ending the job); ${what}`);
    // No more MPI; exit a little later: mpirun forwards a rank's output only
    // while it runs, and its SIGKILL comes 1 s after the SIGTERM.
    this.#stopped = true;
    setTimeout(() => Deno.exit(143), 100);
  };

  #removeListeners(): void {
    globalThis.removeEventListener("unload", this.#onUnload);
    if (this.#settings.handleSigterm) {
      try {
        Deno.removeSignalListener("SIGTERM", this.#onSigterm);
      } catch {
        // Never added.
      }
    }
  }

  // Finishes this rank's operations and waits for every peer's bye, polling
  // synchronously (close is synchronous): MPI_Test, then a short sleep. A
  // peer on this host that dies meanwhile is seen by #progress; the others
  // no longer send heartbeats here (this rank said bye), so silence is not
  // judged.
  #drain(): void {
    const start = performance.now();
    let us = POLL_MIN_US;
    for (;;) {
      const progressed = this.#progress();
      if (this.#noFinalize) return;
      const byes = this.#peers.every((p, q) => q === this.rank || p.closed || p.lost);
      if (this.#ops.size === 0 && byes) return;
      if (performance.now() - start > this.#settings.closeTimeoutMs) return;
      us = progressed ? POLL_MIN_US : Math.min(2 * us, this.#settings.pollMaxUs);
      this.#libc.usleepSync(us);
    }
  }

  // --- progress ----------------------------------------------------------

  #startPump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    this.#pump().catch((e) => this.#mpiFailed(e as Error)).finally(() => this.#pumping = false);
  }

  async #pump(): Promise<void> {
    let us = 0;
    let lastActivity = performance.now();
    const spinMs = this.#settings.pollSpinUs / 1000;
    while (!this.#stopped) {
      const progressed = this.#progress();
      if (this.#stopped) return;
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

  // Ends an idle wait at once (new work that should be polled for).
  #kick(): void {
    const wake = this.#idleWake;
    if (wake === null) return;
    this.#idleWake = null;
    clearTimeout(this.#idleTimer);
    wake();
  }

  #busy(): boolean {
    return this.#ops.size > 0 || this.#queued > 0 || this.#recvWaiting > 0 ||
      this.#barrierWaits.size > 0 || this.#helloWait !== null;
  }

  // One round: take every envelope that has arrived, test every pending
  // request. Returns whether anything happened. Re-entrant: a control
  // handler it calls may close the backend (which polls too).
  #progress(): boolean {
    // A peer process that has died may have announced data that MPI would
    // now try to read from its memory; Open MPI ends this process when that
    // fails, so look first and stop calling MPI once a peer is lost.
    if (this.#settings.heartbeatIntervalMs > 0 && !this.#stopped) {
      for (const q of this.#watch.ended()) this.#peerLost(q, this.#endedWhy(q));
    }
    const mpi = this.#mpi;
    const flag = this.#flag;
    let any = false;
    // Open MPI's MPI_Improbe looks at the messages already taken in and only
    // then runs the progress engine that takes in new ones: ask until two
    // calls in a row find nothing, or a message that arrived just now waits
    // for the next poll.
    for (let misses = 0; misses < 2 && !this.#stopped;) {
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
      const peer = this.#peers[src];
      peer.lastHeard = performance.now();
      const slot: Slot = { ready: false, apply: noop };
      peer.queue.push(slot);
      this.#queued++;
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
        done: () => this.#onEnvelope(src, slot, bytes),
      });
    }
    // Ops added while iterating (payload receives) are tested in this round too.
    for (const op of this.#ops) {
      if (this.#stopped) break;
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

  #isend(
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

  // Sends a control envelope to every peer not lost; to a peer that has
  // closed (it drains until every peer's bye) only a bye or a loss report.
  // `quiet`: a peer that cannot be reached is skipped instead of failing.
  #broadcast(body: ControlEnvelope, quiet = false): void {
    if (this.#stopped) return;
    const bytes = encodeControl(body);
    const toClosed = body.c === "bye" || body.c === "lost";
    for (let q = 0; q < this.size; q++) {
      const p = this.#peers[q];
      if (q === this.rank || p.lost || (p.closed && !toClosed)) continue;
      try {
        this.#isend(q, bytes, ENVELOPE_TAG, `${body.c} envelope`);
      } catch (e) {
        if (!quiet) throw e;
      }
    }
    this.#kick();
  }

  #onEnvelope(src: number, slot: Slot, bytes: Uint8Array): void {
    const env = decodeEnvelope(bytes);
    if (env.kind === "control") {
      slot.apply = () => this.#onControlEnvelope(src, env.body);
      slot.ready = true;
    } else if (env.count === 0) {
      slot.apply = () => this.#deliver(src, env.tag, new Float32Array(0));
      slot.ready = true;
    } else {
      const data = this.#receiveArray(env.count);
      const mpi = this.#mpi;
      const req = new BigUint64Array(1);
      check(
        mpi,
        mpi.MPI_Irecv(data, env.count, mpi.ompi_mpi_float, src, env.payloadTag, this.#comm, req),
        "MPI_Irecv",
      );
      this.#ops.add({
        req,
        keep: data,
        peer: src,
        what: "tensor receive",
        done: () => {
          slot.apply = () => this.#deliver(src, env.tag, data);
          slot.ready = true;
          this.#release(src);
        },
      });
      return;
    }
    this.#release(src);
  }

  // Applies the peer's envelopes in the order it sent them, as far as ready.
  #release(src: number): void {
    const queue = this.#peers[src].queue;
    while (queue.length > 0 && queue[0].ready) {
      queue.shift()!.apply();
      this.#queued--;
    }
  }

  #deliver(src: number, tag: string, data: Float32Array): void {
    if (!this.#closed) this.#mailbox.deliver(src, tag, data);
  }

  #onControlEnvelope(src: number, body: ControlEnvelope): void {
    const peer = this.#peers[src];
    switch (body.c) {
      case "hello":
        peer.pid = body.pid;
        peer.host = body.host;
        peer.hello = true;
        if (peer.host === this.#host) this.#watch.add(src, peer.pid);
        this.#helloWait?.();
        break;
      case "hb":
        break;
      case "barrier": {
        const set = this.#barrierArrivals.get(body.gen) ?? new Set<number>();
        set.add(src);
        this.#barrierArrivals.set(body.gen, set);
        const wait = this.#barrierWaits.get(body.gen);
        if (wait !== undefined && set.size === this.size - 1) {
          this.#barrierWaits.delete(body.gen);
          this.#barrierArrivals.delete(body.gen);
          wait.resolve();
        }
        break;
      }
      case "abort":
        this.#abortLocal(`rank ${src}: ${body.reason}`);
        break;
      case "error": {
        const message = body.report?.message;
        this.#abortLocal(`rank ${src} failed${typeof message === "string" ? `: ${message}` : ""}`);
        break;
      }
      case "lost": {
        const lost = this.#peers[body.rank];
        if (lost === undefined || lost.lost || body.rank === this.rank) break;
        lost.lost = true;
        this.#noFinalize = true;
        console.error(
          `conveyor: rank ${this.rank}: lost rank ${body.rank} (${body.why}; seen by rank ${src})`,
        );
        this.#abortLocal(`rank ${body.rank} lost: ${body.why}`);
        this.#stopped = true; // no more MPI calls: see #progress
        break;
      }
      case "user":
        if (this.#closed) break;
        for (const h of [...this.#handlers]) {
          try {
            h(body.message, src);
          } catch (e) {
            reportError(e);
          }
        }
        break;
      case "bye":
        peer.closed = true;
        this.#watch.remove(src);
        peer.gone.reject(new CommAbortedError(`rank ${src} closed`));
        for (const [gen, wait] of this.#barrierWaits) {
          if (!this.#barrierArrivals.get(gen)?.has(src)) {
            this.#barrierWaits.delete(gen);
            wait.reject(new CommAbortedError(`rank ${src} closed`));
          }
        }
        break;
    }
  }

  // --- failure -----------------------------------------------------------

  #beat(): void {
    if (this.#closed || this.#stopped) return;
    try {
      this.#progress(); // hear what arrived while this thread was busy before judging
      this.#broadcast({ c: "hb" }, true);
    } catch (e) {
      this.#mpiFailed(e as Error);
      return;
    }
    for (const [q, why] of this.#findLost(false)) this.#peerLost(q, why);
  }

  #endedWhy(q: number): string {
    const p = this.#peers[q];
    return `its process ${p.pid} on ${p.host} has ended`;
  }

  // Peers that are gone: on this host, their process has ended; elsewhere,
  // silent for peerTimeoutMs (or, when `suspect`, for two heartbeat periods).
  #findLost(suspect: boolean): [number, string][] {
    const now = performance.now();
    const out: [number, string][] = [];
    const ended = new Set(this.#watch.ended());
    const limit = suspect
      ? Math.min(
        this.#settings.peerTimeoutMs,
        2 * Math.max(this.#settings.heartbeatIntervalMs, 500),
      )
      : this.#settings.peerTimeoutMs;
    for (let q = 0; q < this.size; q++) {
      const p = this.#peers[q];
      if (q === this.rank || p.closed) continue;
      if (p.lost) {
        if (suspect) out.push([q, "reported lost earlier"]);
        continue;
      }
      if (p.hello && p.host === this.#host) {
        if (ended.has(q)) out.push([q, this.#endedWhy(q)]);
        continue;
      }
      const silent = now - p.lastHeard;
      if (this.#settings.heartbeatIntervalMs > 0 && silent > limit) {
        out.push([q, `no message for ${(silent / 1000).toFixed(1)} s from ${p.host || "?"}`]);
      }
    }
    return out;
  }

  // Prints the loss first (Open MPI may end this process in the next MPI
  // call), tells the others, aborts, and makes no MPI call any more.
  #peerLost(q: number, why: string): void {
    const p = this.#peers[q];
    if (p.lost) return;
    p.lost = true;
    this.#noFinalize = true;
    this.#watch.remove(q);
    console.error(`conveyor: rank ${this.rank}: lost rank ${q} (${why})`);
    try {
      this.#broadcast({ c: "lost", rank: q, why }, true);
    } catch {
      // The others find out by themselves.
    }
    this.#abortLocal(`rank ${q} lost: ${why}`);
    this.#stopped = true;
  }

  #mpiFailed(e: Error): void {
    if (this.#stopped) return;
    // An MPI error towards a peer that has died names the peer, not MPI.
    for (const [q, why] of this.#findLost(false)) this.#peerLost(q, why);
    this.#noFinalize = true;
    this.#stopped = true;
    if (!this.#aborted) {
      console.error(`conveyor: rank ${this.rank}: ${e.message}`);
      this.#abortLocal(`rank ${this.rank}: ${e.message}`);
    }
  }

  #abortLocal(reason: string): void {
    if (this.#aborted || this.#closed) return;
    this.#aborted = true;
    this.#fail(new CommAbortedError(reason));
  }

  #fail(error: CommAbortedError): void {
    this.#mailbox.fail(error);
    for (const w of this.#barrierWaits.values()) w.reject(error);
    this.#barrierWaits.clear();
  }
}
