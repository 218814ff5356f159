// The worker group's watchdog: reads the shared status board, the ranks'
// heartbeats and their threads in /proc, and names the rank that hung,
// stalled or exited. Not exported from the package.

import { formatAction } from "../schedule/action.ts";
import type { Schedule } from "../schedule/schedule.ts";
import { type PipelineFailureKind, PipelineRankError } from "./pipeline_rank_error.ts";
import { BEAT, INDEX, ITERATION, PROGRESS, readSlot, STATE, STATE_CODES } from "./_protocol.ts";
import { threadAlive, threadCpuTicks } from "./_threads.ts";

/** Limits of the watchdog, ms. */
export interface WatchdogLimits {
  /** A rank silent (no heartbeat, no CPU in an action) this long is hung. */
  readonly heartbeatTimeoutMs: number;
  /** No action starting on any rank for this long during a run is a stall. */
  readonly stallTimeoutMs: number;
  /** How often `check` runs; heartbeats younger than this are fresh. */
  readonly watchMs: number;
}

/** Watches one worker group's ranks; `check` returns the failure it sees, if any. */
export class Watchdog {
  readonly #schedule: Schedule;
  readonly #board: Int32Array;
  readonly #limits: WatchdogLimits;
  readonly #lastHeartbeat: number[];
  // Per rank: its heartbeat counter on the board when last read.
  readonly #beats: number[];
  // Per rank: its worker's OS thread id (where /proc tells it), the CPU time
  // (clock ticks) last read for it while it was silent, and when that last
  // grew: a silent rank that computes is not hung.
  readonly #thread: (number | undefined)[];
  readonly #cpuTicks: (number | undefined)[];
  readonly #lastCpuAt: number[];
  #armed = false;
  #lastProgress = -1;
  #lastProgressAt = 0;

  readonly #replicas: number;

  /** Watches the D·P ranks of `replicas` copies (default 1) of `schedule`'s pipeline. */
  constructor(schedule: Schedule, board: Int32Array, limits: WatchdogLimits, replicas = 1) {
    const p = schedule.ranks * replicas;
    this.#replicas = replicas;
    this.#schedule = schedule;
    this.#board = board;
    this.#limits = limits;
    this.#lastHeartbeat = new Array<number>(p).fill(Infinity);
    this.#beats = new Array<number>(p).fill(0);
    this.#thread = new Array<number | undefined>(p).fill(undefined);
    this.#cpuTicks = new Array<number | undefined>(p).fill(undefined);
    this.#lastCpuAt = new Array<number>(p).fill(-Infinity);
  }

  /** Records rank `rank`'s OS thread (undefined where it is unknown). */
  setThread(rank: number, tid: number | undefined): void {
    this.#thread[rank] = tid;
  }

  /** Starts watching heartbeats: every rank counts as heard now. */
  arm(now: number): void {
    this.#armed = true;
    this.#lastHeartbeat.fill(now);
  }

  /** A heartbeat of `rank`. */
  heartbeat(rank: number, now: number): void {
    if (this.#armed && rank >= 0 && rank < this.#lastHeartbeat.length) {
      this.#lastHeartbeat[rank] = now;
    }
  }

  /** A run starts: the stall clock starts now. */
  runStarted(now: number): void {
    this.#lastProgress = -1;
    this.#lastProgressAt = now;
  }

  /**
   * The failure seen at `now`, or null: a rank whose thread is gone (exit),
   * one silent past the heartbeat timeout without using CPU (hang), or,
   * during a run, no action started anywhere past the stall timeout.
   */
  check(now: number, running: boolean): PipelineRankError | null {
    if (!this.#armed) return null;
    const p = this.#lastHeartbeat.length;
    // A heartbeat counter that moved since the last check: heard now.
    for (let r = 0; r < p; r++) {
      const beats = this.#slot(r, BEAT);
      if (beats !== this.#beats[r]) {
        this.#beats[r] = beats;
        this.#lastHeartbeat[r] = now;
      }
    }
    for (let r = 0; r < p; r++) {
      if (threadAlive(this.#thread[r]) === false) {
        return this.blame(
          r,
          "exit",
          "its worker thread ended (Deno.exit or a fatal error in the worker)",
        );
      }
    }
    for (let r = 0; r < p; r++) {
      const silent = now - this.#lastHeartbeat[r];
      if (silent <= this.#limits.watchMs) {
        this.#cpuTicks[r] = undefined;
        continue;
      }
      const state = this.#slot(r, STATE);
      const working = state === STATE_CODES.compute || state === STATE_CODES.step;
      let cpuSeen = false;
      if (working) {
        const ticks = threadCpuTicks(this.#thread[r]);
        if (ticks === undefined) continue; // cannot tell compute from a hang: the stall timeout judges
        cpuSeen = true;
        const before = this.#cpuTicks[r];
        this.#cpuTicks[r] = ticks;
        if (before !== undefined && ticks > before) this.#lastCpuAt[r] = now;
      }
      const quiet = now - Math.max(this.#lastHeartbeat[r], this.#lastCpuAt[r]);
      if (quiet > this.#limits.heartbeatTimeoutMs) {
        return this.blame(
          r,
          "hang",
          `no heartbeat for ${
            Math.round(silent)
          } ms (timeout ${this.#limits.heartbeatTimeoutMs} ms)` +
            (cpuSeen ? `, its thread using no CPU for ${Math.round(quiet)} ms` : ""),
        );
      }
    }
    return running ? this.#stall(now) : null;
  }

  /** A {@linkcode PipelineRankError} naming what `rank` was doing, from the board. */
  blame(
    rank: number,
    kind: PipelineFailureKind,
    detail: string,
    workerStack?: string,
  ): PipelineRankError {
    const state = this.#slot(rank, STATE);
    const index = this.#slot(rank, INDEX);
    const iteration = this.#slot(rank, ITERATION);
    const P = this.#schedule.ranks;
    const action = this.#schedule.actions[rank % P]?.[index];
    if (this.#replicas > 1) {
      detail = `replica ${Math.floor(rank / P)}, pipeline rank ${rank % P}: ${detail}`;
    }
    if (
      action === undefined || (state !== STATE_CODES.compute && state !== STATE_CODES.recv &&
        state !== STATE_CODES.step)
    ) {
      return new PipelineRankError({ rank, kind, detail, workerStack });
    }
    const note = state === STATE_CODES.recv
      ? " (while waiting for its input)"
      : state === STATE_CODES.step
      ? ` (in the optimizer step of stage ${action.stage})`
      : "";
    return new PipelineRankError({
      rank,
      kind,
      action,
      iteration,
      between: state === STATE_CODES.step,
      detail: detail + note,
      workerStack,
    });
  }

  #slot(rank: number, field: number): number {
    return readSlot(this.#board, rank, field);
  }

  #stall(now: number): PipelineRankError | null {
    const p = this.#lastHeartbeat.length;
    let progress = 0;
    for (let r = 0; r < p; r++) progress += this.#slot(r, PROGRESS);
    if (progress !== this.#lastProgress) {
      this.#lastProgress = progress;
      this.#lastProgressAt = now;
      return null;
    }
    const still = now - this.#lastProgressAt;
    if (still <= this.#limits.stallTimeoutMs) return null;
    // Blame a rank inside an action (or step) first: the others wait on it.
    const states = Array.from({ length: p }, (_, r) => this.#slot(r, STATE));
    let culprit = states.findIndex((s) => s === STATE_CODES.compute || s === STATE_CODES.step);
    const waiting = states.map((s, r) => s === STATE_CODES.recv ? r : -1).filter((r) => r >= 0);
    let detail = `no action started on any rank for ${
      Math.round(still)
    } ms (stall timeout ${this.#limits.stallTimeoutMs} ms)`;
    if (culprit < 0) {
      culprit = Math.max(0, waiting[0] ?? 0);
      const list = waiting.map((r) => {
        const a = this.#schedule.actions[r % this.#schedule.ranks][this.#slot(r, INDEX)];
        return a === undefined ? `rank ${r}` : `rank ${r} (${formatAction(a)})`;
      });
      detail += `; every busy rank waits for input: ${list.join(", ")}`;
    }
    return this.blame(culprit, "stall", detail);
  }
}
