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
 *   every rank with `rank <r> lost: …` (quoting what the lost rank's last
 *   heartbeat said it was doing, see `reportActivity`); each survivor prints
 *   that to stderr and makes no MPI call any more (Open MPI 4 ends a process whose read of
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

import { CommAbortedError, type CommBackend, type ControlMessage } from "./backend.ts";
import { movedArray } from "./_checks.ts";
import { RankBackend } from "./_rank_backend.ts";
import { checkFfiPermission, errorString, hostname, MpiSetupError } from "./_mpi_ffi.ts";
import {
  type ControlEnvelope,
  decodeEnvelope,
  encodeControl,
  encodeTensor,
  ENVELOPE_TAG,
} from "./_mpi_wire.ts";
import { type MpiBackendOptions, readSettings, type Settings } from "./_mpi_settings.ts";
import { type MpiSession, startMpi } from "./_mpi_start.ts";
import { MpiEngine } from "./_mpi_engine.ts";
import { PeerTable } from "./_mpi_peers.ts";
import { Barriers } from "./_mpi_barrier.ts";
import { describeValue } from "../../text/describe.ts";

export { MpiSetupError } from "./_mpi_ffi.ts";
export type { MpiBackendOptions } from "./_mpi_settings.ts";

// One backend per process: MPI starts once and cannot start again.
let openBackend: MpiBackend | null = null;
let starting = false;
let mpiStarted = false;

/**
 * One rank of an MPI job. Create it with {@linkcode MpiBackend.init} in every
 * process of `mpirun -n <ranks> deno run --allow-ffi script.ts`; rank and size
 * come from MPI_COMM_WORLD. `close()` finalises MPI once every peer has
 * closed (or `closeTimeoutMs` passed), after which the process exits by
 * itself with status 0. A receive rejects if its peer has closed and sent
 * nothing more.
 *
 * @example
 * ```ts
 * // Under `mpirun -n 2 deno run --allow-ffi ping.ts`, rank 1 receives [1, 2];
 * // started any other way, init refuses with an MpiSetupError saying why.
 * import assert from "node:assert/strict";
 * import { MpiBackend, MpiSetupError } from "@conveyor/core/runtime";
 * const underMpirun = Deno.env.get("OMPI_COMM_WORLD_SIZE") !== undefined;
 * if (underMpirun) {
 *   const comm = await MpiBackend.init();
 *   try {
 *     if (comm.rank === 0) await comm.send(1, "x", new Float32Array([1, 2]), { transfer: true });
 *     else if (comm.rank === 1) assert.deepEqual([...await comm.recv(0, "x")], [1, 2]);
 *   } finally {
 *     comm.close();
 *   }
 * } else {
 *   await assert.rejects(MpiBackend.init(), MpiSetupError);
 * }
 * ```
 */
export class MpiBackend extends RankBackend implements CommBackend {
  /**
   * Loads libmpi, initialises MPI (MPI_THREAD_SERIALIZED), duplicates
   * MPI_COMM_WORLD for this backend's traffic and resolves once every rank
   * has said hello. Throws an {@linkcode MpiSetupError} with a one-line
   * explanation when FFI permission is missing, libmpi is not found, the
   * process was not started by mpirun, or MPI already ran in this process;
   * a RangeError for a bad option.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { MpiBackend } from "@conveyor/core/runtime";
   * // A bad option is refused before MPI is touched, under mpirun or not.
   * await assert.rejects(MpiBackend.init({ heartbeatIntervalMs: -1 }), RangeError);
   * ```
   */
  static async init(options: MpiBackendOptions = {}): Promise<MpiBackend> {
    const settings = readSettings(options);
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
      const session = await startMpi(options.libraryPath, () => mpiStarted = true);
      const backend = new MpiBackend(session, settings);
      openBackend = backend;
      await backend.#connect();
      return backend;
    } finally {
      starting = false;
    }
  }

  /** This rank (in MPI_COMM_WORLD). */
  readonly rank: number;
  /** Ranks in the job. */
  readonly size: number;
  /** The libmpi that was loaded (a path or soname). */
  readonly library: string;
  /** MPI_TAG_UB of this MPI: payload tags cycle below it. */
  readonly tagUpperBound: number;

  #session: MpiSession;
  #settings: Settings;
  #peers: PeerTable;
  #engine: MpiEngine;
  #barriers: Barriers;
  #recvWaiting = 0;
  #helloWait: (() => void) | null = null;
  #noFinalize = false;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #activity: (() => string) | null = null;

  private constructor(session: MpiSession, settings: Settings) {
    super();
    this.#session = session;
    this.rank = session.rank;
    this.size = session.size;
    this.tagUpperBound = session.tagUb;
    this.library = session.library;
    this.#settings = settings;
    this.#peers = new PeerTable(session.rank, session.size, hostname(), settings);
    this.#barriers = new Barriers(session.size);
    this.#engine = new MpiEngine(session.mpi, session.libc, session.comm, settings, {
      // A peer process that has died may have announced data that MPI would
      // now try to read from its memory; Open MPI ends this process when that
      // fails, so look first and stop calling MPI once a peer is lost.
      beforePoll: () => {
        if (this.#settings.heartbeatIntervalMs > 0 && !this.#engine.stopped) {
          for (const q of this.#peers.ended()) this.#peerLost(q, this.#peers.endedWhy(q));
        }
      },
      onEnvelope: (src) => {
        const ready = this.#peers.enqueue(src);
        return (bytes) => this.#onEnvelope(src, bytes, ready);
      },
      waiting: () =>
        this.#peers.queued > 0 || this.#recvWaiting > 0 || this.#barriers.waiting ||
        this.#helloWait !== null,
      onFailure: (e) => this.#mpiFailed(e),
    });
  }

  // A ready array is handed to MPI before send returns (MPI_Isend of an
  // envelope, then of the array). With `transfer: true` MPI sends the
  // caller's own buffer, which is detached (no copy); otherwise a copy is
  // sent and the caller keeps its array.
  /** @ignore */
  protected sendArray(peer: number, tag: string, array: Float32Array, transfer: boolean): void {
    if (this.#peers.peers[peer].closed) throw new CommAbortedError(`rank ${peer} closed`);
    if (array.length > 0x7fffffff) {
      throw new RangeError(
        `data must hold at most 2147483647 floats, got ${describeValue(array.length)}`,
      );
    }
    const owned = movedArray(array, transfer);
    void owned.buffer; // a small array moves off the V8 heap, where MPI may read it later
    const payloadTag = this.#peers.nextPayloadTag(peer, this.tagUpperBound);
    this.#engine.isend(peer, encodeTensor(tag, owned.length, payloadTag), ENVELOPE_TAG, "envelope");
    if (owned.length > 0) this.#engine.sendTensor(peer, owned, payloadTag);
    this.#engine.kick();
  }

  // A receive rejects if `peer` has closed and sent nothing more.
  /** @ignore */
  protected override take(peer: number, tag: string): Promise<Float32Array> {
    const taken = super.take(peer, tag);
    if (peer === this.rank) return taken;
    // A message already kept wins the race (it settled first).
    const result = Promise.race([taken, this.#peers.peers[peer].gone.promise]);
    this.#recvWaiting++;
    const settle = () => void this.#recvWaiting--;
    result.then(settle, settle);
    this.#engine.kick();
    return result;
  }

  /** See {@linkcode CommBackend.barrier}; point-to-point messages, not MPI_Barrier. */
  barrier(): Promise<void> {
    if (this.mailbox.error !== null) return Promise.reject(this.mailbox.error);
    const gen = this.#barriers.next();
    const closed = this.#peers.peers.findIndex((p, q) =>
      p.closed && !this.#barriers.arrived(gen, q)
    );
    if (closed >= 0) return Promise.reject(new CommAbortedError(`rank ${closed} closed`));
    try {
      this.#broadcast({ c: "barrier", gen });
    } catch (e) {
      return Promise.reject(e);
    }
    const done = this.#barriers.wait(gen);
    this.#engine.kick();
    return done;
  }

  /**
   * See {@linkcode CommBackend.broadcastControl}. The message is
   * serialised with the structured-clone algorithm (node:v8); a message
   * that cannot be cloned throws a TypeError.
   */
  broadcastControl(message: ControlMessage): void {
    this.mailbox.throwIfFailed();
    this.#broadcast({ c: "user", message });
  }

  /** See {@linkcode CommBackend.abort}; peers abort with `rank <r>: <reason>`. */
  abort(reason: string): void {
    if (this.aborted || this.closed) return;
    this.#broadcast({ c: "abort", reason: String(reason) }, true);
    this.abortLocal(String(reason));
  }

  /**
   * Tells every peer that this rank failed (they abort with
   * `rank <r> failed: <report.message>`) and aborts this rank.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import type { MpiBackend } from "@conveyor/core/runtime";
   * // Each rank of an mpirun job runs its step so: report, then rethrow.
   * async function guarded(comm: MpiBackend, step: () => Promise<void>): Promise<void> {
   *   try {
   *     await step();
   *   } catch (e) {
   *     comm.reportError({ type: "error", message: String(e) });
   *     throw e;
   *   }
   * }
   * // Outside mpirun, a stand-in shows what reaches reportError.
   * const reports: unknown[] = [];
   * const comm = { reportError: (r: unknown) => void reports.push(r) } as unknown as MpiBackend;
   * await guarded(comm, async () => {});
   * await assert.rejects(guarded(comm, () => Promise.reject(new Error("boom"))), /boom/);
   * assert.deepEqual(reports, [{ type: "error", message: "Error: boom" }]);
   * ```
   */
  reportError(report: ControlMessage): void {
    if (this.aborted || this.closed) return;
    this.#broadcast({ c: "error", report }, true);
    this.abortLocal(`rank ${this.rank} failed`);
  }

  /**
   * See {@linkcode CommBackend.reportActivity}: each heartbeat carries what
   * `describe` says then (at most 200 characters), and when this rank's
   * process is lost the survivors quote the last one they heard, with its
   * age (a heartbeat goes out every `heartbeatIntervalMs` while the event
   * loop turns, so it is as old as the rank's last turn at most).
   *
   * @example
   * ```ts
   * import type { MpiBackend } from "@conveyor/core/runtime";
   * // A rank names its current action for the others' error messages.
   * let now = "starting";
   * function watch(comm: MpiBackend): void {
   *   comm.reportActivity(() => now);
   * }
   * // Outside mpirun, a stand-in shows what the heartbeat would read.
   * let read: (() => string) | null = null;
   * watch({ reportActivity: (d: (() => string) | null) => read = d } as unknown as MpiBackend);
   * now = "computing 1F3";
   * console.log(read!()); // "computing 1F3"
   * ```
   */
  reportActivity(describe: (() => string) | null): void {
    this.#activity = describe;
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
    if (!this.markClosed()) return;
    clearInterval(this.#heartbeat);
    this.#removeListeners();
    this.#engine.kick();
    try {
      if (!this.#noFinalize) {
        this.#broadcast({ c: "bye" }, true);
        // A peer on this host that dies meanwhile is seen by the engine's
        // polls; the others no longer send heartbeats here (this rank said
        // bye), so silence is not judged.
        this.#engine.drainSync(
          () => this.#noFinalize,
          () => this.#peers.allGone,
          this.#settings.closeTimeoutMs,
        );
      }
    } catch (e) {
      this.#noFinalize = true;
      console.error(
        `conveyor: rank ${this.rank}: MPI failed while closing: ${(e as Error).message}`,
      );
    }
    this.#engine.stopped = true;
    this.#peers.clear();
    this.#engine.release();
    openBackend = null;
    if (this.#noFinalize || !this.#session.ownsMpi) return;
    const mpi = this.#session.mpi;
    const code = mpi.MPI_Finalize();
    if (code !== 0) {
      console.error(`conveyor: rank ${this.rank}: MPI_Finalize failed: ${errorString(mpi, code)}`);
    }
  }

  // --- lifecycle ---------------------------------------------------------

  async #connect(): Promise<void> {
    this.#engine.startPump();
    const hello: ControlEnvelope = { c: "hello", pid: Deno.pid, host: this.#peers.host };
    try {
      this.#broadcast(hello);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.#helloWait = null;
          reject(
            new MpiSetupError(
              `rank ${this.rank}: no hello from rank(s) ${
                this.#peers.missingHello().join(", ")
              } within ${this.#settings.connectTimeoutMs} ms`,
            ),
          );
        }, this.#settings.connectTimeoutMs);
        this.#helloWait = () => {
          if (!this.#peers.allHello) return;
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
    const lost = this.#peers.findLost(true);
    const what = lost.length > 0
      ? lost.map(([q, why]) => `lost rank ${q} (${why}${this.#peers.lastActivity(q)})`).join("; ")
      : "no peer found lost";
    console.error(`conveyor: rank ${this.rank}: SIGTERM (mpirun is ending the job); ${what}`);
    // No more MPI; exit a little later: mpirun forwards a rank's output only
    // while it runs, and its SIGKILL comes 1 s after the SIGTERM.
    this.#engine.stopped = true;
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

  // --- messages ----------------------------------------------------------

  // Sends a control envelope to every peer not lost; to a peer that has
  // closed (it drains until every peer's bye) only a bye or a loss report.
  // `quiet`: a peer that cannot be reached is skipped instead of failing.
  #broadcast(body: ControlEnvelope, quiet = false): void {
    if (this.#engine.stopped) return;
    const bytes = encodeControl(body);
    const toClosed = body.c === "bye" || body.c === "lost";
    for (let q = 0; q < this.size; q++) {
      const p = this.#peers.peers[q];
      if (q === this.rank || p.lost || (p.closed && !toClosed)) continue;
      try {
        this.#engine.isend(q, bytes, ENVELOPE_TAG, `${body.c} envelope`);
      } catch (e) {
        if (!quiet) throw e;
      }
    }
    this.#engine.kick();
  }

  // An envelope's bytes are in: `ready` sets what applying it does (once
  // its payload, if any, is in too); envelopes apply in the peer's order.
  #onEnvelope(src: number, bytes: Uint8Array, ready: (apply: () => void) => void): void {
    const env = decodeEnvelope(bytes);
    if (env.kind === "control") {
      ready(() => this.#onControlEnvelope(src, env.body));
    } else if (env.count === 0) {
      ready(() => this.#deliver(src, env.tag, new Float32Array(0)));
    } else {
      this.#engine.receiveTensor(
        src,
        env.count,
        env.payloadTag,
        (data) => ready(() => this.#deliver(src, env.tag, data)),
      );
    }
  }

  #deliver(src: number, tag: string, data: Float32Array): void {
    if (!this.closed) this.mailbox.deliver(src, tag, data);
  }

  #onControlEnvelope(src: number, body: ControlEnvelope): void {
    switch (body.c) {
      case "hello":
        this.#peers.hello(src, body.pid, body.host);
        this.#helloWait?.();
        break;
      case "hb":
        if (typeof body.at === "string") this.#peers.activity(src, body.at);
        break;
      case "barrier":
        this.#barriers.arrive(body.gen, src);
        break;
      case "abort":
        this.abortLocal(`rank ${src}: ${body.reason}`);
        break;
      case "error": {
        const message = body.report?.message;
        this.abortLocal(`rank ${src} failed${typeof message === "string" ? `: ${message}` : ""}`);
        break;
      }
      case "lost": {
        const lost = this.#peers.peers[body.rank];
        if (lost === undefined || lost.lost || body.rank === this.rank) break;
        lost.lost = true;
        this.#noFinalize = true;
        console.error(
          `conveyor: rank ${this.rank}: lost rank ${body.rank} (${body.why}; seen by rank ${src})`,
        );
        this.abortLocal(`rank ${body.rank} lost: ${body.why}`, { rank: body.rank, why: body.why });
        this.#engine.stopped = true; // no more MPI calls: see beforePoll
        break;
      }
      case "user":
        if (this.closed) break;
        for (const h of [...this.handlers]) {
          try {
            h(body.message, src);
          } catch (e) {
            reportError(e);
          }
        }
        break;
      case "bye":
        this.#peers.closed(src);
        this.#barriers.closed(src);
        break;
    }
  }

  // --- failure -----------------------------------------------------------

  #beat(): void {
    if (this.closed || this.#engine.stopped) return;
    try {
      this.#engine.progress(); // hear what arrived while this thread was busy before judging
      this.#broadcast({ c: "hb", at: this.#activityNow() }, true);
    } catch (e) {
      this.#mpiFailed(e as Error);
      return;
    }
    for (const [q, why] of this.#peers.findLost(false)) this.#peerLost(q, why);
  }

  // What this rank's describer says now ("" without one, or when it throws).
  #activityNow(): string {
    try {
      return this.#activity === null ? "" : String(this.#activity()).slice(0, 200);
    } catch {
      return "";
    }
  }

  // Prints the loss first (Open MPI may end this process in the next MPI
  // call), tells the others, aborts, and makes no MPI call any more.
  #peerLost(q: number, seen: string): void {
    if (!this.#peers.markLost(q)) return;
    const why = seen + this.#peers.lastActivity(q);
    this.#noFinalize = true;
    console.error(`conveyor: rank ${this.rank}: lost rank ${q} (${why})`);
    try {
      this.#broadcast({ c: "lost", rank: q, why }, true);
    } catch {
      // The others find out by themselves.
    }
    this.abortLocal(`rank ${q} lost: ${why}`, { rank: q, why });
    this.#engine.stopped = true;
  }

  #mpiFailed(e: Error): void {
    if (this.#engine.stopped) return;
    // An MPI error towards a peer that has died names the peer, not MPI.
    for (const [q, why] of this.#peers.findLost(false)) this.#peerLost(q, why);
    this.#noFinalize = true;
    this.#engine.stopped = true;
    if (!this.aborted) {
      console.error(`conveyor: rank ${this.rank}: ${e.message}`);
      this.abortLocal(`rank ${this.rank}: ${e.message}`);
    }
  }

  /** @ignore */
  protected override fail(error: CommAbortedError): void {
    super.fail(error);
    this.#barriers.fail(error);
  }
}
