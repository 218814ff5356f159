// Worker side of bench/transport_bench.ts: rank 0 drives ping-pong rounds,
// rank 1 echoes, over one of several transports. Not a bench by itself.

import { WorkerBackend } from "../src/pipeline/comm/worker_backend.ts";

export type Mode = "backend" | "port" | "port-copy" | "sab" | "sab-async" | "broadcast";

interface Init {
  type: "init";
  rank: number;
  runId: string;
  mesh: (MessagePort | null)[];
  raw: MessagePort;
  sab: SharedArrayBuffer;
}
interface Go {
  type: "go";
  mode: Mode;
  floats: number;
  rounds: number;
}

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<Init | Go>) => void) | null;
  postMessage(m: unknown): void;
};

let rank = -1;
let comm: WorkerBackend;
let raw: MessagePort;
let flags: Int32Array;
let shared: Float32Array;
let bc: BroadcastChannel;
const rawInbox: Float32Array[] = [];
let rawWait: ((a: Float32Array) => void) | null = null;
const bcInbox: Float32Array[] = [];
let bcWait: ((a: Float32Array) => void) | null = null;

function take(inbox: Float32Array[], set: (w: (a: Float32Array) => void) => void) {
  return new Promise<Float32Array>((resolve) => {
    const a = inbox.shift();
    if (a !== undefined) resolve(a);
    else set(resolve);
  });
}

// One hop over shared memory: copy in, bump the sequence number, wake the peer;
// the peer copies out. Two copies per hop, no transfer.
let seq = 0;
function sabSend(a: Float32Array): void {
  shared.set(a);
  Atomics.store(flags, 1 - rank, ++seq);
  Atomics.notify(flags, 1 - rank);
}
function sabRecv(floats: number, into: Float32Array): Float32Array {
  Atomics.wait(flags, rank, seq);
  seq = Atomics.load(flags, rank);
  into.set(shared.subarray(0, floats));
  return into;
}
// The same through the event loop (Atomics.waitAsync), as a runtime that
// also serves other peers and timers would have to wait.
async function sabRecvAsync(floats: number, into: Float32Array): Promise<Float32Array> {
  const w = Atomics.waitAsync(flags, rank, seq);
  if (w.async) await w.value;
  seq = Atomics.load(flags, rank);
  into.set(shared.subarray(0, floats));
  return into;
}

async function hop(mode: Mode, a: Float32Array, peer: number): Promise<Float32Array> {
  switch (mode) {
    case "backend":
      await comm.send(peer, "x", a, { transfer: true });
      return await comm.recv(peer, "x");
    case "port":
      raw.postMessage(a, [a.buffer as ArrayBuffer]);
      return await take(rawInbox, (w) => rawWait = w);
    case "port-copy":
      raw.postMessage(a);
      return await take(rawInbox, (w) => rawWait = w);
    case "broadcast":
      bc.postMessage(a);
      return await take(bcInbox, (w) => bcWait = w);
    case "sab":
      sabSend(a);
      return sabRecv(a.length, a);
    case "sab-async":
      sabSend(a);
      return await sabRecvAsync(a.length, a);
  }
}

scope.onmessage = async (e) => {
  const msg = e.data;
  if (msg.type === "init") {
    rank = msg.rank;
    raw = msg.raw;
    raw.onmessage = (m: MessageEvent<Float32Array>) => {
      if (rawWait !== null) {
        const w = rawWait;
        rawWait = null;
        w(m.data);
      } else rawInbox.push(m.data);
    };
    bc = new BroadcastChannel(`bench-${msg.runId}`);
    bc.onmessage = (m: MessageEvent<Float32Array>) => {
      if (bcWait !== null) {
        const w = bcWait;
        bcWait = null;
        w(m.data);
      } else bcInbox.push(m.data);
    };
    flags = new Int32Array(msg.sab, 0, 2);
    shared = new Float32Array(msg.sab, 8);
    comm = await WorkerBackend.connect({ rank, size: 2, runId: msg.runId, ports: msg.mesh });
    scope.postMessage({ type: "ready" });
    return;
  }
  const { mode, floats, rounds } = msg;
  let a: Float32Array = new Float32Array(floats).fill(rank);
  if (rank === 0) {
    const t = performance.now();
    for (let i = 0; i < rounds; i++) a = await hop(mode, a, 1);
    const ms = performance.now() - t;
    scope.postMessage({ type: "done", ms });
  } else {
    for (let i = 0; i < rounds; i++) {
      // Echo: receive, send the same array back.
      let got: Float32Array;
      if (mode === "sab" || mode === "sab-async") {
        got = mode === "sab" ? sabRecv(floats, a) : await sabRecvAsync(floats, a);
        sabSend(got);
        continue;
      }
      if (mode === "backend") got = await comm.recv(0, "x");
      else if (mode === "broadcast") got = await take(bcInbox, (w) => bcWait = w);
      else got = await take(rawInbox, (w) => rawWait = w);
      if (mode === "backend") await comm.send(0, "x", got, { transfer: true });
      else if (mode === "port") raw.postMessage(got, [got.buffer as ArrayBuffer]);
      else if (mode === "port-copy") raw.postMessage(got);
      else bc.postMessage(got);
    }
    scope.postMessage({ type: "done", ms: 0 });
  }
};
