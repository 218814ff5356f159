// Worker side of bench/_worker_link.ts: connects as one of two worker
// ranks (the runtime's WorkerBackend) and times ping-pongs to the other
// with copying sends, as the gradient all-reduce sends (one buffer to
// every other replica, so never transferred); rank 0 fits a link model to
// the one-way times (`linkFromSamples`) and both post it back. Not a bench
// by itself.

import { WorkerBackend } from "../src/pipeline/comm/worker_backend.ts";
import { linkFromSamples, type LinkSample } from "../src/pipeline/comm/link_model.ts";

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

async function measure(comm: WorkerBackend, sizes: readonly number[], rounds: number) {
  for (const s of sizes) {
    if (!Number.isInteger(s) || s < 4 || s % 4 !== 0) {
      throw new RangeError(`each size must be a positive multiple of 4 bytes, got ${s}`);
    }
  }
  const peer = 1 - comm.rank;
  if (comm.rank === 1) {
    for (const bytes of sizes) {
      for (let i = 0; i <= rounds; i++) {
        await comm.send(peer, `link/${bytes}`, await comm.recv(peer, `link/${bytes}`));
      }
    }
    const m = await comm.recv(peer, "link/model");
    return { latencyMs: m[0], bytesPerMs: m[1] };
  }
  const samples: LinkSample[] = [];
  for (const bytes of sizes) {
    let a: Float32Array = new Float32Array(bytes / 4).fill(1);
    const times: number[] = [];
    for (let i = 0; i <= rounds; i++) {
      const t = performance.now();
      await comm.send(peer, `link/${bytes}`, a);
      a = await comm.recv(peer, `link/${bytes}`);
      if (i > 0) times.push(performance.now() - t); // the first round is a warm-up
    }
    times.sort((x, y) => x - y);
    samples.push({ bytes, ms: times[times.length >> 1] / 2 });
  }
  const fit = linkFromSamples(samples);
  // Both ranks return the very same numbers: the f32 that travels.
  const model = new Float32Array([fit.latencyMs, fit.bytesPerMs]);
  await comm.send(peer, "link/model", model);
  return { latencyMs: model[0], bytesPerMs: model[1] };
}

scope.onmessage = async (e) => {
  const { rank, runId, ports, sizes, rounds } = e.data;
  const comm = await WorkerBackend.connect({ rank, size: 2, runId, ports });
  try {
    scope.postMessage(await measure(comm, sizes, rounds));
  } catch (err) {
    scope.postMessage({ error: String((err as Error)?.stack ?? err) });
  } finally {
    comm.close();
  }
};
