/**
 * Host process of a subprocess rank group: started by
 * {@linkcode SubprocessRankGroup} as `deno run <flags> subprocess_host.ts
 * <socket path>`, it connects back over the Unix socket, builds a worker
 * rank group from the first message and serves runs, calls and the dispose
 * until told to end, then exits (even when a rank's thread could not be
 * ended: the parent may also kill it at any time).
 *
 * Not meant to be imported.
 *
 * @module
 */

import { WorkerRankGroup } from "./worker_rank_group.ts";
import type { CallMap } from "./stage_executor.ts";
import { readFrames, writeFrame } from "./_frames.ts";
import { toErrorFields } from "./_error_fields.ts";
import type { FromHost, HostInit, ToHost } from "./_subprocess_protocol.ts";

async function main(path: string): Promise<void> {
  const conn = await Deno.connect({ transport: "unix", path });
  const send = (m: FromHost) => writeFrame(conn, m).catch(() => {});
  let group: WorkerRankGroup<CallMap> | null = null;
  let writes = Promise.resolve();
  const reply = (m: FromHost) => {
    writes = writes.then(() => send(m));
  };
  for await (const raw of readFrames(conn)) {
    const msg = raw as ToHost;
    switch (msg.type) {
      case "init": {
        const init = msg as HostInit;
        try {
          group = await WorkerRankGroup.create<CallMap>({
            schedule: init.schedule,
            executor: { module: init.module, options: (r: number) => init.options[r] },
            ...(init.heartbeatIntervalMs === undefined
              ? {}
              : { heartbeatIntervalMs: init.heartbeatIntervalMs }),
            ...(init.heartbeatTimeoutMs === undefined
              ? {}
              : { heartbeatTimeoutMs: init.heartbeatTimeoutMs }),
            ...(init.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: init.stallTimeoutMs }),
            ...(init.startupTimeoutMs === undefined
              ? {}
              : { startupTimeoutMs: init.startupTimeoutMs }),
            ...(init.fault === undefined ? {} : { fault: init.fault }),
            validateSteps: init.validateSteps,
            ...(init.clipNorm === undefined ? {} : { clipNorm: init.clipNorm }),
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
        await writes;
        conn.close();
        // A rank's thread that could not be ended would keep this process alive.
        Deno.exit(0);
      }
    }
  }
  // The parent went away: nothing here may outlive it.
  Deno.exit(0);
}

if (import.meta.main) await main(Deno.args[0]);
