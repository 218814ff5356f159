// Test worker for worker_backend_test.ts: joins the group with WorkerBackend
// and plays one scenario, posting what it saw to the main thread.

import { WorkerBackend } from "../../../src/pipeline/comm/worker_backend.ts";
import { makeTag, type TagSpace } from "../../../src/pipeline/runtime/tag.ts";

interface Init {
  rank: number;
  size: number;
  runId: string;
  ports: (MessagePort | null)[];
  scenario: "exchange" | "barrier" | "abort" | "control";
  timeOrigin: number;
}

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<Init>) => void) | null;
  postMessage(m: unknown): void;
};
const now = (origin: number) => performance.now() + performance.timeOrigin - origin;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

scope.onmessage = async (e) => {
  const { rank, size, runId, ports, scenario, timeOrigin } = e.data;
  const comm = await WorkerBackend.connect({ rank, size, runId, ports, heartbeatIntervalMs: 50 });
  try {
    switch (scenario) {
      case "exchange": {
        const spaces: TagSpace[] = ["activation", "gradient"];
        let detached = true;
        for (let q = 0; q < size; q++) {
          if (q === rank) continue;
          for (const space of spaces) {
            for (let mb = 0; mb < 4; mb++) {
              const a = new Float32Array([rank, q, mb, space === "activation" ? 0 : 1]);
              await comm.send(q, makeTag({ space, microBatch: mb, stage: q, iteration: 0 }), a, {
                transfer: true,
              });
              detached &&= a.length === 0;
            }
          }
        }
        const got: number[][] = [];
        for (let q = size - 1; q >= 0; q--) {
          if (q === rank) continue;
          for (const space of [...spaces].reverse()) {
            for (let mb = 3; mb >= 0; mb--) {
              const tag = makeTag({ space, microBatch: mb, stage: rank, iteration: 0 });
              got.push([...await comm.recv(q, tag)]);
            }
          }
        }
        scope.postMessage({ rank, got, detached });
        break;
      }
      case "barrier": {
        await sleep(rank * 40);
        const before = now(timeOrigin);
        await comm.barrier();
        const after = now(timeOrigin);
        scope.postMessage({ rank, before, after });
        break;
      }
      case "abort": {
        if (rank === 1) {
          await sleep(30);
          comm.abort("boom");
          scope.postMessage({ rank, error: null });
        } else {
          const error = await comm.recv((rank + 1) % size, "never").then(
            () => "resolved?!",
            (e: Error) => `${e.name}: ${e.message}`,
          );
          scope.postMessage({ rank, error });
        }
        break;
      }
      case "control": {
        const seen = new Promise<string>((resolve) =>
          comm.onControl((m, from) => resolve(`${m.type} from ${from}`))
        );
        await comm.barrier();
        if (rank === 0) {
          comm.broadcastControl({ type: "ping" });
          scope.postMessage({ rank, seen: null });
        } else {
          scope.postMessage({ rank, seen: await seen });
        }
        break;
      }
    }
  } finally {
    comm.close();
  }
};
