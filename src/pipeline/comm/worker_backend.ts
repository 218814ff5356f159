/**
 * The {@linkcode CommBackend} of a rank that runs in a Deno worker.
 *
 * Two planes: a BroadcastChannel named after the run carries the control
 * plane (rendezvous, heartbeats, barrier, abort, error reports and user
 * control messages) — it is slow for bulk data and cannot transfer buffers;
 * tensors travel on one MessagePort per pair of ranks, transferring the
 * ArrayBuffer so that no byte is copied (`bench/transport_bench.ts` measures
 * this against copying through shared memory). The main thread creates the
 * ports with {@linkcode createPortMesh} and hands each worker its row.
 *
 * @module
 */

import type { CommAbortedError, CommBackend, ControlMessage } from "./backend.ts";
import { checkPeer, checkSize, ownedArray } from "./_checks.ts";
import { CHANNEL_PREFIX, type DataMessage, type Envelope, isEnvelope, MAIN } from "./_envelope.ts";
import { RankBackend } from "./_rank_backend.ts";
import { describeValue } from "../../text/describe.ts";

/** What a worker needs to join its group. */
export interface WorkerBackendInit {
  /** This rank. */
  readonly rank: number;
  /** Ranks in the group. */
  readonly size: number;
  /** Names the run's BroadcastChannel; every rank and the main thread use the same id. */
  readonly runId: string;
  /** `ports[q]`: the port to rank q (null or absent for this rank itself). */
  readonly ports: readonly (MessagePort | null | undefined)[];
  /** Heartbeat period on the control plane in ms (0 = none; default 0). */
  readonly heartbeatIntervalMs?: number;
}

/** Options of {@linkcode WorkerBackend.connect}. */
export interface ConnectOptions {
  /** How long to wait for the main thread's go in ms (default 30 000). */
  readonly timeoutMs?: number;
}

/**
 * Creates the data-plane ports of a group: one MessageChannel per pair of
 * ranks. Row r (`mesh[r]`) holds rank r's port to every other rank, with
 * `null` at r; send each row to its worker in the transfer list.
 *
 * @example
 * ```ts
 * import { createPortMesh } from "@conveyor/core/runtime";
 * const mesh = createPortMesh(3);
 * console.log(mesh[1].map((p) => p === null)); // [ false, true, false ]
 * for (const row of mesh) for (const p of row) p?.close();
 * ```
 */
export function createPortMesh(size: number): (MessagePort | null)[][] {
  checkSize(size);
  const mesh: (MessagePort | null)[][] = Array.from(
    { length: size },
    () => new Array<MessagePort | null>(size).fill(null),
  );
  for (let a = 0; a < size; a++) {
    for (let b = a + 1; b < size; b++) {
      const ch = new MessageChannel();
      mesh[a][b] = ch.port1;
      mesh[b][a] = ch.port2;
    }
  }
  return mesh;
}

/**
 * One rank of a worker group. Create it inside the worker with
 * {@linkcode WorkerBackend.connect}, which waits until the main thread has
 * heard every rank on the control plane. Peer failures arrive as error
 * reports or aborts on the control plane and abort this rank too.
 *
 * @example
 * ```ts
 * // Inside a worker that received { rank, size, runId, ports } from the main
 * // thread (a WorkerRankGroup sends them), connect resolves once the main
 * // thread says go; with no main thread listening it times out.
 * import assert from "node:assert/strict";
 * import { createPortMesh, WorkerBackend } from "@conveyor/core/runtime";
 * const mesh = createPortMesh(2);
 * const init = { rank: 0, size: 2, runId: crypto.randomUUID(), ports: mesh[0] };
 * await assert.rejects(WorkerBackend.connect(init, { timeoutMs: 50 }), /no go from the main thread/);
 * for (const row of mesh) for (const p of row) p?.close();
 * ```
 */
export class WorkerBackend extends RankBackend implements CommBackend {
  /**
   * Opens the control plane, says hello and resolves once the main thread
   * answers go (after it has heard every rank), so that no control message
   * can be sent before every rank listens.
   */
  static connect(init: WorkerBackendInit, options: ConnectOptions = {}): Promise<WorkerBackend> {
    const backend = new WorkerBackend(init);
    const timeoutMs = options.timeoutMs ?? 30_000;
    return new Promise<WorkerBackend>((resolve, reject) => {
      const timer = setTimeout(() => {
        backend.close();
        reject(new Error(`rank ${init.rank}: no go from the main thread within ${timeoutMs} ms`));
      }, timeoutMs);
      backend.#onGo = () => {
        clearTimeout(timer);
        backend.#startHeartbeat();
        resolve(backend);
      };
      backend.#post({ c: "hello", from: backend.rank });
    });
  }

  /** This rank. */
  readonly rank: number;
  /** Ranks in the group. */
  readonly size: number;
  #channel: BroadcastChannel;
  #ports: (MessagePort | null)[];
  #barrierCount = 0;
  #barrierArrivals = new Map<number, Set<number>>();
  #barrierWaits = new Map<number, { resolve(): void; reject(e: Error): void }>();
  #onGo: (() => void) | null = null;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #heartbeatMs: number;
  #seq = 0;

  private constructor(init: WorkerBackendInit) {
    super();
    if (init === null || typeof init !== "object") {
      throw new TypeError(
        `init must be an object { rank, size, runId, ports }, got ${describeValue(init)}`,
      );
    }
    this.size = checkSize(init.size);
    this.rank = checkPeer(init.rank, this.size);
    if (typeof init.runId !== "string" || init.runId.length === 0) {
      throw new TypeError(`runId must be a non-empty string, got ${JSON.stringify(init.runId)}`);
    }
    if (!Array.isArray(init.ports) || init.ports.length !== this.size) {
      throw new RangeError(
        `ports must hold one entry per rank (${this.size}), got ${init.ports?.length}`,
      );
    }
    this.#heartbeatMs = init.heartbeatIntervalMs ?? 0;
    this.#ports = init.ports.map((port, q) => {
      if (q === this.rank) return null;
      if (!(port instanceof MessagePort)) {
        throw new TypeError(`ports[${q}] must be a MessagePort, got ${describeValue(port)}`);
      }
      port.onmessage = (e: MessageEvent<DataMessage>) =>
        this.mailbox.deliver(q, e.data.tag, e.data.data);
      return port;
    });
    this.#channel = new BroadcastChannel(CHANNEL_PREFIX + init.runId);
    this.#channel.onmessage = (e: MessageEvent) => this.#onEnvelope(e.data);
  }

  // A ready array is posted before send returns, so a caller that blocks its
  // thread next (synchronous compute) does not hold the message back.
  /** @ignore */
  protected sendArray(peer: number, tag: string, array: Float32Array, transfer: boolean): void {
    const owned = ownedArray(array, transfer);
    const message: DataMessage = { tag, data: owned };
    this.#ports[peer]!.postMessage(message, [owned.buffer as ArrayBuffer]);
  }

  /** See {@linkcode CommBackend.barrier}; runs on the control plane. */
  barrier(): Promise<void> {
    if (this.mailbox.error !== null) return Promise.reject(this.mailbox.error);
    const gen = ++this.#barrierCount;
    this.#post({ c: "barrier", from: this.rank, gen });
    if (this.size === 1 || (this.#barrierArrivals.get(gen)?.size ?? 0) === this.size - 1) {
      this.#barrierArrivals.delete(gen);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => this.#barrierWaits.set(gen, { resolve, reject }));
  }

  /** See {@linkcode CommBackend.broadcastControl}; the main thread hears it too. */
  broadcastControl(message: ControlMessage): void {
    this.mailbox.throwIfFailed();
    this.#post({ c: "user", from: this.rank, message });
  }

  /**
   * Broadcasts an error report (for the main thread's fail-fast) and aborts
   * this rank and its peers. `report` should name what failed.
   */
  reportError(report: ControlMessage): void {
    if (this.closed) return;
    this.#post({ c: "error", from: this.rank, report });
    this.abortLocal(`rank ${this.rank} failed`);
  }

  /** See {@linkcode CommBackend.abort}; peers abort with `rank <r>: <reason>`. */
  abort(reason: string): void {
    if (this.aborted || this.closed) return;
    this.#post({ c: "abort", from: this.rank, reason: String(reason) });
    this.abortLocal(String(reason));
  }

  /** Stops the heartbeat, closes the ports and the channel; pending receives reject. */
  close(): void {
    if (!this.markClosed()) return;
    clearInterval(this.#heartbeat);
    for (const p of this.#ports) p?.close();
    this.#channel.close();
  }

  #startHeartbeat(): void {
    if (this.#heartbeatMs > 0) {
      this.#post({ c: "hb", from: this.rank, seq: this.#seq++ });
      this.#heartbeat = setInterval(
        () => this.#post({ c: "hb", from: this.rank, seq: this.#seq++ }),
        this.#heartbeatMs,
      );
    }
  }

  #post(envelope: Envelope): void {
    if (!this.closed) this.#channel.postMessage(envelope);
  }

  #onEnvelope(e: unknown): void {
    if (!isEnvelope(e) || this.closed || e.from === this.rank) return;
    switch (e.c) {
      case "go":
        if (e.from === MAIN) this.#onGo?.();
        this.#onGo = null;
        break;
      case "barrier": {
        const gen = e.gen;
        const set = this.#barrierArrivals.get(gen) ?? new Set<number>();
        set.add(e.from);
        this.#barrierArrivals.set(gen, set);
        const wait = this.#barrierWaits.get(gen);
        if (wait !== undefined && set.size === this.size - 1) {
          this.#barrierWaits.delete(gen);
          this.#barrierArrivals.delete(gen);
          wait.resolve();
        }
        break;
      }
      case "abort":
        this.abortLocal(e.from === MAIN ? e.reason : `rank ${e.from}: ${e.reason}`);
        break;
      case "error":
        this.abortLocal(`rank ${e.from} failed`);
        break;
      case "user":
        for (const h of [...this.handlers]) h(e.message, e.from);
        break;
    }
  }

  /** @ignore */
  protected override fail(error: CommAbortedError): void {
    super.fail(error);
    for (const w of this.#barrierWaits.values()) w.reject(error);
    this.#barrierWaits.clear();
  }
}
