import { checkOptionSpelling } from "../../text/nearest.ts";
import { describeValue } from "../../text/describe.ts";
// The options of MpiBackend.init and their checked, defaulted form. Used by
// the MPI backend's files only; `MpiBackendOptions` is re-exported by
// mpi_backend.ts.

/** Options of {@linkcode MpiBackend.init}. */
export interface MpiBackendOptions {
  /** libmpi to load (default: `CONVEYOR_LIBMPI`, else `libmpi.so.40` and the usual paths). */
  readonly libraryPath?: string;
  /**
   * Heartbeat period in ms (default 1000; 0 turns heartbeats and liveness
   * checks off, leaving mpirun's SIGTERM as the only news of a dead peer).
   * Every period each rank sends a small message to each peer; a peer is
   * lost after `peerTimeoutMs` of silence. A peer on this host is also
   * checked before every MPI call (a pidfd, one poll(2)) and is lost as
   * soon as its process has ended, or after `heartbeatTimeoutMs` of silence
   * with its main thread using no CPU (stopped, or blocked in a wait).
   */
  readonly heartbeatIntervalMs?: number;
  /**
   * Silence after which a peer counts as lost, in ms (default 15 000): it
   * hangs, or computes without a break (a rank is silent while it computes
   * synchronously, so this must exceed the longest synchronous stretch of
   * any rank).
   */
  readonly peerTimeoutMs?: number;
  /**
   * Silence after which a peer on this host whose main thread uses no CPU
   * meanwhile (stopped by a signal, blocked in a wait or a deadlock) counts
   * as lost, in ms (default 5000; Linux, from /proc). At most `peerTimeoutMs`.
   */
  readonly heartbeatTimeoutMs?: number;
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

/** {@linkcode MpiBackendOptions} checked, with every default filled in. */
export interface Settings {
  readonly heartbeatIntervalMs: number;
  readonly peerTimeoutMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly pollMaxUs: number;
  readonly pollSpinUs: number;
  readonly idlePollMs: number;
  readonly connectTimeoutMs: number;
  readonly closeTimeoutMs: number;
  readonly handleSigterm: boolean;
}

/** Shortest pause between two polls, in µs. */
export const POLL_MIN_US = 25;

function optionMs(
  options: MpiBackendOptions,
  key: keyof MpiBackendOptions,
  fallback: number,
  min: number,
): number {
  const v = options[key] ?? fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min) {
    throw new RangeError(`${key} must be a number >= ${min}, got ${describeValue(v)}`);
  }
  return v;
}

/** Checks `options` (TypeError / RangeError naming the option) and fills in the defaults. */
export function readSettings(options: MpiBackendOptions): Settings {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, [
    "libraryPath",
    "heartbeatIntervalMs",
    "peerTimeoutMs",
    "heartbeatTimeoutMs",
    "pollMaxUs",
    "pollSpinUs",
    "idlePollMs",
    "connectTimeoutMs",
    "closeTimeoutMs",
    "handleSigterm",
  ], "MpiBackend.init: ");
  const peerTimeoutMs = optionMs(options, "peerTimeoutMs", 15_000, 1);
  return {
    heartbeatIntervalMs: optionMs(options, "heartbeatIntervalMs", 1000, 0),
    peerTimeoutMs,
    heartbeatTimeoutMs: Math.min(
      optionMs(options, "heartbeatTimeoutMs", 5000, 1),
      peerTimeoutMs,
    ),
    pollMaxUs: optionMs(options, "pollMaxUs", 1000, POLL_MIN_US),
    pollSpinUs: optionMs(options, "pollSpinUs", 200, 0),
    idlePollMs: optionMs(options, "idlePollMs", 10, 1),
    connectTimeoutMs: optionMs(options, "connectTimeoutMs", 60_000, 1),
    closeTimeoutMs: optionMs(options, "closeTimeoutMs", 10_000, 0),
    handleSigterm: options.handleSigterm ?? true,
  };
}
