// Worker side of bench/_worker_link.ts: connects as one of two worker
// ranks (the runtime's WorkerBackend) and measures the link to the other
// with `measureLink`, then posts the fitted model back. Not a bench by itself.

import { WorkerBackend } from "../src/pipeline/comm/worker_backend.ts";
import { measureLink } from "../src/pipeline/comm/link_model.ts";

interface Init {
  readonly rank: number;
  readonly runId: string;
  readonly ports: (MessagePort | null)[];
  readonly sizes: readonly number[];
  readonly rounds: number;
}

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<Init>) => void) | null;
  postMessage(m: unknown): void;
};

scope.onmessage = async (e) => {
  const { rank, runId, ports, sizes, rounds } = e.data;
  const comm = await WorkerBackend.connect({ rank, size: 2, runId, ports });
  try {
    const link = await measureLink(comm, 1 - rank, { sizes, rounds });
    scope.postMessage({ latencyMs: link.latencyMs, bytesPerMs: link.bytesPerMs });
  } catch (err) {
    scope.postMessage({ error: String((err as Error)?.stack ?? err) });
  } finally {
    comm.close();
  }
};
