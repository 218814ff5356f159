/**
 * The ranks of a pipeline in a child Deno process: a {@linkcode RankGroup}
 * whose host process runs them as a worker rank group (one worker per rank,
 * tensors over MessagePorts as usual) and answers this process's runs and
 * calls over its standard input and output (what the ranks print comes
 * through here). It costs a process start (about 0.1–0.3 s) and one hop per
 * run for payloads and results; in exchange it can always be ended: a rank
 * whose code holds its thread (a synchronous loop, a blocking wait), which
 * Deno cannot stop in a worker, ends with its process. Needs `--allow-run`
 * here; the host gets exactly this process's permission flags, deny lists
 * included (read from its command line), and nothing else: no temporary
 * file, no socket. It ignores SIGINT and SIGTERM, which this process's
 * script handles (or dies of, which ends the host).
 *
 * @module
 */

import type { Schedule } from "../schedule/schedule.ts";
import type { CallMap, NoCalls } from "./rank_executor.ts";
import type { RankGroupKind, RankGroupRunOptions, RankGroupRunResult } from "./rank_group.ts";
import { checkWorkerGroupOptions, type WorkerRankGroupOptions } from "./worker_rank_group.ts";
import { PipelineRankError } from "./pipeline_rank_error.ts";
import { checkRunOptions } from "./_run_results.ts";
import { type FrameSink, writeFrame } from "./_frames.ts";
import { FrameLineReader, lineTag } from "./_frame_lines.ts";
import { childPermissionFlags, denoCommand } from "./_permission_flags.ts";
import { optionsFor } from "./_placement.ts";
import { RankGroupBase } from "./_rank_group_base.ts";
import { fromErrorFields } from "./_error_fields.ts";
import type { FromHost, ToHost } from "./_subprocess_protocol.ts";

const HOST_URL = new URL("./subprocess_host.ts", import.meta.url).href;
// How long a disposed host may take to end before it is killed.
const HOST_EXIT_GRACE_MS = 5000;

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
}

// `p`, or `fallback` after `ms` (the timer never outlives the race).
function within<T>(p: Promise<T>, ms: number, fallback: () => T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<T>((resolve, reject) => {
      timer = setTimeout(() => {
        try {
          resolve(fallback());
        } catch (e) {
          reject(e);
        }
      }, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Every rank in one child process. See {@linkcode RankGroup}; the options
 * are a worker rank group's.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { generateSchedule, SubprocessRankGroup } from "@conveyor/core/runtime";
 * import { SYNTHETIC_EXECUTOR_URL } from "@conveyor/core/testing";
 * const group = await SubprocessRankGroup.create({
 *   schedule: generateSchedule("1f1b", { ranks: 2, microBatches: 2 }),
 *   executor: { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 1 } },
 * });
 * try {
 *   assert.equal((await group.run()).events.length, 8); // F and B of 2 micro-batches on 2 ranks
 * } finally {
 *   await group.dispose();
 * }
 * ```
 */
export class SubprocessRankGroup<C extends CallMap = NoCalls> extends RankGroupBase<C> {
  /**
   * Checks the options as a worker group does, starts the host process and
   * waits until its ranks are ready.
   */
  static async create<C extends CallMap = NoCalls>(
    options: WorkerRankGroupOptions,
  ): Promise<SubprocessRankGroup<C>> {
    const t = checkWorkerGroupOptions(options);
    const schedule = t.schedule;
    const ex = options.executor;
    const perRank = Array.from({ length: schedule.ranks }, (_, r) => optionsFor(ex.options, r));
    let flags: string[];
    try {
      flags = await childPermissionFlags();
    } catch (e) {
      throw new PipelineRankError({
        rank: 0,
        kind: "startup",
        detail: `the ranks' host process cannot be given exactly this process's permissions: ${
          (e as Error).message
        }`,
      });
    }
    const word = crypto.randomUUID().replaceAll("-", "");
    const child = new Deno.Command(denoCommand(), {
      args: ["run", ...flags, HOST_URL, word],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const group = new SubprocessRankGroup<C>(schedule, child, word);
    try {
      await within(
        group.#started,
        t.startupTimeoutMs,
        () => {
          throw new PipelineRankError({
            rank: 0,
            kind: "startup",
            detail: `the ranks' host process did not start within ${t.startupTimeoutMs} ms`,
          });
        },
      );
      await group.#request({
        type: "init",
        schedule,
        module: String(ex.module),
        options: perRank,
        heartbeatIntervalMs: t.heartbeatIntervalMs,
        startupTimeoutMs: t.startupTimeoutMs,
        policy: t.policy,
      });
    } catch (e) {
      group.isClosed = true;
      await group.#kill();
      throw e;
    }
    return group;
  }

  /** The ranks live in a child process. */
  readonly kind: RankGroupKind = "subprocess";
  readonly #child: Deno.ChildProcess;
  readonly #stdin: FrameSink;
  #started: Promise<void>;
  #startedNow!: (ok: boolean, e?: Error) => void;
  #reading: Promise<void>;
  #printing = Promise.resolve();
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #running = false;
  #stuck: readonly number[] = [];
  #ended: Promise<void> | null = null;
  #refs = 0;

  private constructor(schedule: Schedule, child: Deno.ChildProcess, word: string) {
    super(schedule);
    this.#child = child;
    const writer = child.stdin.getWriter();
    this.#stdin = {
      write: async (p) => {
        await writer.write(p);
        return p.length;
      },
    };
    this.#started = new Promise<void>((resolve, reject) => {
      this.#startedNow = (ok, e) => ok ? resolve() : reject(e);
    });
    this.#started.catch(() => {});
    this.#reading = this.#read(new FrameLineReader(lineTag(word)));
    // The host exiting on its own fails whatever waits for it.
    child.status.then((s) => {
      if (this.isClosed) return;
      const ranks = this.ranks === 1 ? "rank 0" : `ranks 0-${this.ranks - 1}`;
      this.#fail(
        new PipelineRankError({
          rank: 0,
          kind: "exit",
          detail: `the ranks' host process (${ranks}) exited with code ${s.code}${
            s.signal === null ? "" : ` (${s.signal})`
          }`,
        }),
      );
    });
  }

  /** Ranks whose thread the host could not end (it was then ended with its process). */
  get stuckRanks(): readonly number[] {
    return this.#stuck;
  }

  /** Runs the schedule in the host (see {@linkcode RankGroup.run}). */
  async run(options?: RankGroupRunOptions): Promise<RankGroupRunResult> {
    const run = checkRunOptions(options);
    this.throwIfUnusable();
    if (this.#running) throw new Error("a run is already in progress on this rank group");
    this.#running = true;
    try {
      return await this.#request({
        type: "run",
        id: 0,
        iterations: run.iterations,
        forwardOnly: run.forwardOnly,
        payloads: Array.from({ length: this.ranks }, (_, r) => run.payloads(r)),
      }) as RankGroupRunResult;
    } finally {
      this.#running = false;
    }
  }

  // Calls run in the host, also while a run is in progress there.
  /** @ignore */
  protected answer(rank: number, method: keyof C & string, args: unknown): Promise<unknown> {
    return this.#request({ type: "call", id: 0, rank, method, args });
  }

  /**
   * Disposes the host's ranks and ends the host process; a host that does
   * not end within a few seconds (a rank's thread it could not end keeps it
   * alive) is killed, so that nothing of the group is left running.
   * Idempotent.
   */
  async dispose(): Promise<void> {
    if (this.isClosed) return await this.#end();
    this.isClosed = true;
    try {
      const r = await within(
        this.#request({ type: "dispose", id: 0 }, true),
        HOST_EXIT_GRACE_MS,
        () => null,
      ) as { stuck: readonly number[] } | null;
      if (r !== null) this.#stuck = r.stuck;
    } catch {
      // The host failed or went away: it is killed below.
    }
    await this.#end();
  }

  // Reads the host's output: messages are answered, the ranks' text goes
  // on to this process's standard output as it came.
  async #read(reader: FrameLineReader): Promise<void> {
    const print = (parts: Uint8Array[]) => {
      for (const p of parts) {
        if (p.length === 0) continue;
        this.#printing = this.#printing.then(async () => {
          for (let at = 0; at < p.length;) at += await Deno.stdout.write(p.subarray(at));
        }).catch(() => {});
      }
    };
    try {
      for await (const chunk of this.#child.stdout) {
        const { text, messages } = reader.push(chunk);
        print(text);
        for (const m of messages) this.#onMessage(m as FromHost);
      }
    } catch {
      // A broken stream: the status watcher reports the host's end.
    }
    print([reader.end()]);
  }

  #onMessage(msg: FromHost): void {
    if (msg.type === "started") return this.#startedNow(true);
    const id = msg.type === "ready" ? 0 : msg.id;
    const p = this.#pending.get(id);
    this.#pending.delete(id);
    switch (msg.type) {
      case "ready":
        p?.resolve(null);
        break;
      case "result":
        p?.resolve(msg.value);
        break;
      case "disposed":
        p?.resolve({ stuck: msg.stuck });
        break;
      case "error": {
        const error = fromErrorFields(msg.error);
        if (msg.fatal) this.#fail(error);
        p?.reject(error);
        break;
      }
    }
  }

  #request(msg: ToHost, evenIfClosed = false): Promise<unknown> {
    if (!evenIfClosed) this.throwIfUnusable();
    const id = msg.type === "init" ? 0 : this.#nextId++;
    const sent = msg.type === "init" ? msg : { ...msg, id };
    const reply = new Promise<unknown>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      // A host that cannot take the message has ended or is ending: the
      // status watcher fails every request with how it ended.
      writeFrame(this.#stdin, sent).catch(() => {});
    });
    // The host and its pipes keep this process alive only while a request waits.
    this.#refs++;
    this.#setRef();
    return reply.finally(() => {
      this.#refs--;
      this.#setRef();
    });
  }

  #setRef(): void {
    const on = this.#refs > 0;
    try {
      if (on) this.#child.ref();
      else this.#child.unref();
    } catch {
      // gone
    }
  }

  #fail(error: Error): void {
    if (this.failedWith !== null) return;
    this.failedWith = error;
    this.isClosed = true;
    for (const p of this.#pending.values()) p.reject(error);
    this.#pending.clear();
    this.#startedNow(false, error);
    // A failed group is spent: its host (and any thread it could not end) goes now.
    void this.#end();
  }

  // Waits briefly for the host to exit, kills it if it does not, and cleans up.
  #end(): Promise<void> {
    this.#ended ??= (async () => {
      // Waiting for the host's end must keep this process alive.
      this.#refs++;
      this.#setRef();
      const exited = await within(
        this.#child.status.then(() => true),
        this.failedWith === null ? HOST_EXIT_GRACE_MS : 0,
        () => false,
      );
      if (!exited) await this.#kill();
      await this.#reading;
      await this.#printing;
    })();
    return this.#ended;
  }

  async #kill(): Promise<void> {
    try {
      this.#child.kill("SIGKILL");
    } catch {
      // already gone
    }
    await this.#child.status;
  }
}
