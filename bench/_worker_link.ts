// The link between two Deno workers, measured as the runtime's gradient
// all-reduce uses it (WorkerBackend over MessagePorts, copying sends: the
// same buffer goes to every other replica, so it is not transferred): two
// workers time ping-pongs and the fitted `LinkModel` (latency, bytes per
// ms; `linkFromSamples`) comes back. Used by bench/data_parallel.ts for the
// simulator's all-reduce.

import { createPortMesh } from "../src/pipeline/comm/worker_backend.ts";
import { ControlPlane } from "../src/pipeline/comm/control_plane.ts";
import type { LinkModel } from "../src/pipeline/comm/link_model.ts";

/** Options of {@linkcode measureWorkerLink}. */
export interface WorkerLinkOptions {
  /** Message sizes in bytes, multiples of 4, at least two distinct (default 4 B, 64 KiB, 1 MiB). */
  readonly sizes?: readonly number[];
  /** Round trips timed per size (default 16). */
  readonly rounds?: number;
  /** Gives up after this many ms (default 60 000). */
  readonly timeoutMs?: number;
}

/**
 * Starts two workers, measures the link between them (the median round
 * trip of copying sends per size over 2, as `measureLink` times transfers,
 * fitted by `linkFromSamples`) and ends
 * both workers before it resolves. Both workers agree on the model; an
 * error in either rejects, naming it.
 */
export async function measureWorkerLink(options: WorkerLinkOptions = {}): Promise<LinkModel> {
  const sizes = options.sizes ?? [4, 64 << 10, 1 << 20];
  const rounds = options.rounds ?? 16;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const runId = crypto.randomUUID();
  const control = new ControlPlane(runId, 2);
  const mesh = createPortMesh(2);
  const url = new URL("./_link_worker.ts", import.meta.url).href;
  const workers = [0, 1].map(() => new Worker(url, { type: "module" }));
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const answers = workers.map((w, rank) =>
      new Promise<LinkModel>((resolve, reject) => {
        w.onmessage = (e: MessageEvent<LinkModel & { error?: string }>) => {
          if (e.data.error !== undefined) {
            reject(new Error(`link worker ${rank}: ${e.data.error}`));
          } else resolve({ latencyMs: e.data.latencyMs, bytesPerMs: e.data.bytesPerMs });
        };
        w.onerror = (e) => {
          e.preventDefault();
          reject(new Error(`link worker ${rank}: ${e.message}`));
        };
      })
    );
    workers.forEach((w, rank) => {
      const ports = mesh[rank].filter((p): p is MessagePort => p !== null);
      w.postMessage({ rank, runId, ports: mesh[rank], sizes, rounds }, ports);
    });
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the link measurement took over ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    // A worker that fails to start rejects its answer before any rendezvous.
    const both = Promise.all(answers);
    await Promise.race([control.rendezvous(), both, timeout]);
    const [a, b] = await Promise.race([both, timeout]);
    if (a.latencyMs !== b.latencyMs || a.bytesPerMs !== b.bytesPerMs) {
      throw new Error(`the two workers disagree on the link: ${JSON.stringify([a, b])}`);
    }
    return a;
  } finally {
    clearTimeout(timer);
    for (const w of workers) w.terminate();
    await control.close();
  }
}
