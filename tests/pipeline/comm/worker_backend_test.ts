import assert from "node:assert/strict";
import type { ControlMessage } from "../../../src/pipeline/comm/backend.ts";
import { createPortMesh } from "../../../src/pipeline/comm/worker_backend.ts";
import { ControlPlane, controlPlaneSettled } from "../../../src/pipeline/comm/control_plane.ts";
import { liveCount, startWorker } from "../../../src/pipeline/runtime/_worker_registry.ts";

const URL_ = new URL("./_backend_worker.ts", import.meta.url).href;

// Starts `size` workers on one scenario and collects one message from each.
async function play(
  size: number,
  scenario: string,
  onControl?: (m: ControlMessage, from: number) => void,
  beforeClose?: () => Promise<void>,
): Promise<Record<string, unknown>[]> {
  await controlPlaneSettled();
  const runId = crypto.randomUUID();
  const heartbeats = new Array<number>(size).fill(0);
  const control = new ControlPlane(runId, size, {
    onHeartbeat: (r) => heartbeats[r]++,
    onControl,
  });
  const mesh = createPortMesh(size);
  const workers = Array.from({ length: size }, (_, r) => startWorker(URL_, `test-${r}`));
  try {
    const results = workers.map((w) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        w.worker.onmessage = (e) => resolve(e.data);
        w.worker.onerror = (e) => {
          e.preventDefault();
          reject(new Error(e.message));
        };
      })
    );
    workers.forEach((w, rank) =>
      w.worker.postMessage(
        { rank, size, runId, ports: mesh[rank], scenario, timeOrigin: performance.timeOrigin },
        mesh[rank].filter((p): p is MessagePort => p !== null),
      )
    );
    await control.rendezvous();
    const out = await Promise.all(results);
    assert.ok(heartbeats.every((n) => n >= 1), `every rank said hello: ${heartbeats}`);
    // Control messages to the main thread may still be in flight: closing the
    // channel now would drop them.
    await beforeClose?.();
    return out;
  } finally {
    for (const w of workers) w.terminate();
    await control.close();
    assert.equal(liveCount(), 0, "no worker outlives the test");
  }
}

Deno.test("WorkerBackend: tensors cross workers by transfer, matched by tag in any order", async () => {
  const size = 3;
  const out = await play(size, "exchange");
  for (const r of out) {
    const rank = r.rank as number;
    assert.equal(r.detached, true, "sent buffers are transferred, not copied");
    const expected: number[][] = [];
    for (let q = size - 1; q >= 0; q--) {
      if (q === rank) continue;
      for (const space of [1, 0]) {
        for (let mb = 3; mb >= 0; mb--) expected.push([q, rank, mb, space]);
      }
    }
    assert.deepEqual(r.got, expected, `rank ${rank} got each message under its own tag`);
  }
});

Deno.test("WorkerBackend: barrier releases no rank before the last one arrives", async () => {
  const out = await play(3, "barrier");
  const lastArrival = Math.max(...out.map((r) => r.before as number));
  for (const r of out) {
    assert.ok(
      (r.after as number) >= lastArrival - 0.5,
      `rank ${r.rank} left at ${r.after} before the last arrival at ${lastArrival}`,
    );
  }
  assert.ok(lastArrival - Math.min(...out.map((r) => r.before as number)) >= 60);
});

Deno.test("WorkerBackend: abort rejects the peers' pending recvs, naming rank and reason", async () => {
  const out = await play(3, "abort");
  const byRank = new Map(out.map((r) => [r.rank as number, r.error]));
  assert.match(String(byRank.get(0)), /^CommAbortedError: .*rank 1: boom/);
  assert.match(String(byRank.get(2)), /^CommAbortedError: .*rank 1: boom/);
});

Deno.test("WorkerBackend: control messages reach the other ranks and the main thread", async () => {
  const main: string[] = [];
  let arrived!: () => void;
  const atMain = new Promise<void>((resolve) => arrived = resolve);
  const out = await play(3, "control", (m, from) => {
    main.push(`${m.type} from ${from}`);
    arrived();
  }, async () => {
    // The control plane and the workers' result messages travel separately;
    // wait (bounded) for the main thread's copy before the channel closes.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      atMain,
      new Promise<void>((resolve) => timer = setTimeout(resolve, 10_000)),
    ]);
    clearTimeout(timer);
  });
  for (const r of out) if (r.rank !== 0) assert.equal(r.seen, "ping from 0");
  assert.deepEqual(main, ["ping from 0"]);
});
