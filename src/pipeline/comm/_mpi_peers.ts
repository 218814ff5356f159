// What a rank of the MPI backend knows of its peers: who they are (pid,
// host), whether they are alive (silence; for those on this host also a
// pidfd and their main thread's CPU time), whether they closed, and the
// envelopes from each still to be applied in the order the peer sent them.
// Used by mpi_backend.ts only.

import { CommAbortedError } from "./backend.ts";
import { mainThreadStat, ProcessWatch } from "./_mpi_ffi.ts";
import { PAYLOAD_TAG_MIN } from "./_mpi_wire.ts";
import type { Settings } from "./_mpi_settings.ts";

// One incoming envelope, processed in the order the peer sent it.
interface Slot {
  ready: boolean;
  apply: () => void;
}

/** One peer of this rank. */
export interface Peer {
  pid: number;
  host: string;
  hello: boolean;
  lastHeard: number;
  closed: boolean;
  lost: boolean;
  queue: Slot[];
  nextPayloadTag: number;
  /** Its main thread's CPU ticks when last read while it was silent (this host). */
  ticks: number | undefined;
  /** When its CPU time last grew while it was silent. */
  lastCpuAt: number;
  /** Rejects once the peer has closed (a receive from it then fails). */
  gone: PromiseWithResolvers<never>;
  /** What its last heartbeat said it was doing ("" if nothing), and when that came. */
  activity: string;
  activityAt: number;
}

const noop = (): void => {};

/** The peers of one rank, itself included (as a peer that is always there). */
export class PeerTable {
  /** This rank. */
  readonly rank: number;
  /** This machine's host name. */
  readonly host: string;
  /** One entry per rank of the job. */
  readonly peers: Peer[];
  /** Envelopes found but not applied yet, over all peers. */
  queued = 0;
  #watch = new ProcessWatch();
  #settings: Settings;

  constructor(rank: number, size: number, host: string, settings: Settings) {
    this.rank = rank;
    this.host = host;
    this.#settings = settings;
    const now = performance.now();
    this.peers = Array.from({ length: size }, (_, q) => {
      const gone = Promise.withResolvers<never>();
      gone.promise.catch(noop);
      return {
        pid: q === rank ? Deno.pid : 0,
        host: q === rank ? host : "",
        hello: q === rank,
        lastHeard: now,
        closed: false,
        lost: false,
        queue: [],
        nextPayloadTag: PAYLOAD_TAG_MIN,
        ticks: undefined,
        lastCpuAt: -Infinity,
        gone,
        activity: "",
        activityAt: 0,
      };
    });
  }

  /** The payload tag for the next tensor to `q` (cycling below `tagUb`). */
  nextPayloadTag(q: number, tagUb: number): number {
    const p = this.peers[q];
    const tag = p.nextPayloadTag;
    p.nextPayloadTag = tag >= tagUb ? PAYLOAD_TAG_MIN : tag + 1;
    return tag;
  }

  /**
   * An envelope from `src` was found: returns the function that, once the
   * envelope is understood, sets what applying it does; envelopes of one
   * peer are applied in the order they were found, as soon as all before
   * them are ready.
   */
  enqueue(src: number): (apply: () => void) => void {
    const peer = this.peers[src];
    peer.lastHeard = performance.now();
    const slot: Slot = { ready: false, apply: noop };
    peer.queue.push(slot);
    this.queued++;
    return (apply) => {
      slot.apply = apply;
      slot.ready = true;
      this.#release(src);
    };
  }

  // Applies the peer's envelopes in the order it sent them, as far as ready.
  #release(src: number): void {
    const queue = this.peers[src].queue;
    while (queue.length > 0 && queue[0].ready) {
      queue.shift()!.apply();
      this.queued--;
    }
  }

  /** Peer `q` said hello from process `pid` on `host`: watch it if it is on this host. */
  hello(q: number, pid: number, host: string): void {
    const peer = this.peers[q];
    peer.pid = pid;
    peer.host = host;
    peer.hello = true;
    if (host === this.host) this.#watch.add(q, pid);
  }

  /** Peer `q`'s heartbeat said what it is doing. */
  activity(q: number, text: string): void {
    const p = this.peers[q];
    p.activity = text;
    p.activityAt = performance.now();
  }

  /**
   * "; its last heartbeat, 0.4 s before: <what it said>" for a peer whose
   * heartbeat said what it was doing, else "".
   */
  lastActivity(q: number): string {
    const p = this.peers[q];
    if (p === undefined || p.activity === "") return "";
    const age = ((performance.now() - p.activityAt) / 1000).toFixed(1);
    return `; its last heartbeat, ${age} s before: ${p.activity}`;
  }

  /** Whether every peer has said hello. */
  get allHello(): boolean {
    return this.peers.every((p) => p.hello);
  }

  /** Ranks that have not said hello. */
  missingHello(): number[] {
    return this.peers.flatMap((p, q) => p.hello ? [] : [q]);
  }

  /** Peer `q` said bye: it sends nothing more. */
  closed(q: number): void {
    const peer = this.peers[q];
    peer.closed = true;
    this.#watch.remove(q);
    peer.gone.reject(new CommAbortedError(`rank ${q} closed`));
  }

  /** Marks `q` lost (false if it already was). */
  markLost(q: number): boolean {
    const p = this.peers[q];
    if (p.lost) return false;
    p.lost = true;
    this.#watch.remove(q);
    return true;
  }

  /** Whether every peer has closed or is lost. */
  get allGone(): boolean {
    return this.peers.every((p, q) => q === this.rank || p.closed || p.lost);
  }

  /** Peers on this host whose process has ended (each until marked lost). */
  ended(): number[] {
    return this.#watch.ended();
  }

  /** Why peer `q`, whose process has ended, is lost. */
  endedWhy(q: number): string {
    const p = this.peers[q];
    return `its process ${p.pid} on ${p.host} has ended`;
  }

  /**
   * Peers that are gone: silent for peerTimeoutMs (or, when `suspect`, for
   * two heartbeat periods), or on this host, ended, or silent for
   * heartbeatTimeoutMs while their main thread used no CPU (stopped or
   * blocked; a thread that computes is judged by peerTimeoutMs).
   */
  findLost(suspect: boolean): [number, string][] {
    const now = performance.now();
    const out: [number, string][] = [];
    const ended = new Set(this.#watch.ended());
    const s = this.#settings;
    const limit = suspect
      ? Math.min(s.peerTimeoutMs, 2 * Math.max(s.heartbeatIntervalMs, 500))
      : s.peerTimeoutMs;
    const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    for (let q = 0; q < this.peers.length; q++) {
      const p = this.peers[q];
      if (q === this.rank || p.closed) continue;
      if (p.lost) {
        if (suspect) out.push([q, "reported lost earlier"]);
        continue;
      }
      const here = p.hello && p.host === this.host;
      if (here && ended.has(q)) {
        out.push([q, this.endedWhy(q)]);
        continue;
      }
      if (s.heartbeatIntervalMs === 0) continue;
      const silent = now - p.lastHeard;
      if (silent <= s.heartbeatIntervalMs) {
        p.ticks = undefined;
        continue;
      }
      const stat = here ? mainThreadStat(p.pid) : undefined;
      if (stat !== undefined) {
        if (p.ticks !== undefined && stat.ticks > p.ticks) p.lastCpuAt = now;
        p.ticks = stat.ticks;
        const quiet = now - Math.max(p.lastHeard, p.lastCpuAt);
        if (quiet > s.heartbeatTimeoutMs) {
          out.push([
            q,
            `hung: no message for ${secs(silent)} and its process ${p.pid} used no CPU for ${
              secs(quiet)
            }${stat.state === "T" ? " (it is stopped)" : ""}`,
          ]);
          continue;
        }
      }
      if (silent > limit) {
        out.push([
          q,
          stat === undefined
            ? `no message for ${secs(silent)} from ${p.host || "?"}`
            : `stalled: no message for ${secs(silent)} while its process ${p.pid} computes ` +
              `without a break (peerTimeoutMs ${s.peerTimeoutMs})`,
        ]);
      }
    }
    return out;
  }

  /** Stops watching every process. */
  clear(): void {
    this.#watch.clear();
  }
}
