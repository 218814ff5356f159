/**
 * Host process of a subprocess rank group: started by
 * {@linkcode SubprocessRankGroup} as `deno run <flags> subprocess_host.ts
 * <word>`, it reads the group's messages from its standard input and
 * answers in tagged lines on its standard output (which its ranks print to
 * too; `<word>` makes the tag), builds a worker rank group from the first
 * message and serves runs, calls and the dispose until told to end, then
 * exits (even when a rank's thread could not be ended: the parent may also
 * kill it at any time). It leaves SIGINT and SIGTERM to the parent: a
 * Ctrl-C reaches every process of the terminal's group, and the parent's
 * script decides what happens (save, then dispose, or end).
 *
 * Not meant to be imported.
 *
 * @module
 */

import { WorkerRankGroup } from "./worker_rank_group.ts";
import type { CallMap } from "./rank_executor.ts";
import { markScheduleChecked } from "./checked_schedule.ts";
import { readFrames } from "./_frames.ts";
import { frameLines, lineTag } from "./_frame_lines.ts";
import { toErrorFields } from "./_error_fields.ts";
import type { FromHost, HostInit, ToHost } from "./_subprocess_protocol.ts";

async function main(word: string): Promise<void> {
  for (const signal of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(signal, () => {});
  const tag = lineTag(word);
  let group: WorkerRankGroup<CallMap> | null = null;
  const reply = (m: FromHost) => {
    let lines: string[];
    try {
      lines = frameLines(m, tag);
    } catch (e) {
      // An answer that cannot be serialised fails its request, not the host.
      if (m.type !== "result") throw e;
      lines = frameLines({ type: "error", id: m.id, error: toErrorFields(e), fatal: false }, tag);
    }
    try {
      for (const line of lines) console.log(line);
    } catch {
      Deno.exit(0); // the parent is gone (its end of the pipe closed)
    }
  };
  reply({ type: "started" });
  try {
    for await (const raw of readFrames(Deno.stdin)) await serve(raw as ToHost);
  } catch {
    // A broken stream: the parent went away.
  }
  // The parent went away: nothing here may outlive it.
  Deno.exit(0);

  async function serve(msg: ToHost): Promise<void> {
    switch (msg.type) {
      case "init": {
        const init = msg as HostInit;
        try {
          group = await WorkerRankGroup.create<CallMap>({
            // Checked by the parent: not run through the full check again.
            schedule: markScheduleChecked(init.schedule),
            executor: { module: init.module, options: (r: number) => init.options[r] },
            heartbeatIntervalMs: init.heartbeatIntervalMs,
            startupTimeoutMs: init.startupTimeoutMs,
            policy: init.policy,
          });
          reply({ type: "ready" });
        } catch (e) {
          reply({ type: "error", id: 0, error: toErrorFields(e), fatal: true });
        }
        break;
      }
      case "run":
        group!.run({
          iterations: msg.iterations,
          forwardOnly: msg.forwardOnly,
          payload: (rank, i) => msg.payloads[rank]?.[i],
        }).then(
          (value) => reply({ type: "result", id: msg.id, value }),
          (e) => reply({ type: "error", id: msg.id, error: toErrorFields(e), fatal: true }),
        );
        break;
      case "call":
        group!.call(msg.rank, msg.method, msg.args).then(
          (value) => reply({ type: "result", id: msg.id, value }),
          (e) =>
            reply({ type: "error", id: msg.id, error: toErrorFields(e), fatal: group!.closed }),
        );
        break;
      case "dispose": {
        await group?.dispose().catch(() => {});
        reply({ type: "disposed", id: msg.id, stuck: group?.stuckRanks ?? [] });
        // A rank's thread that could not be ended would keep this process alive.
        Deno.exit(0);
      }
    }
  }
}

if (import.meta.main) await main(Deno.args[0]);
