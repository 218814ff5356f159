/**
 * Transport between two pipeline workers: bytes per second of a ping-pong
 * (rank 0 sends, rank 1 sends the same tensor back; both directions count)
 * for 64 KiB, 1 MiB and 16 MiB tensors, through
 *
 * - `WorkerBackend` (MessagePort, buffer transferred) — what the runtime uses,
 * - a plain transferred `postMessage` on a MessagePort,
 * - a copying `postMessage` (structured clone),
 * - SharedArrayBuffer: `TypedArray.set` in, Atomics wake-up (blocking
 *   `Atomics.wait`, or `Atomics.waitAsync` through the event loop as a runtime
 *   would have to), `TypedArray.set` out,
 * - BroadcastChannel (the control plane; copies, cannot transfer; up to 1 MiB),
 *
 * and `TypedArray.set` in one thread (memory bandwidth, the floor of any
 * copying transport), all in the same run.
 *
 * ```sh
 * deno run -A bench/transport_bench.ts          # table
 * deno run -A bench/transport_bench.ts --json   # one JSON object per line
 * deno bench -A bench/transport_bench.ts        # Deno.bench groups (in-thread costs)
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createPortMesh } from "../src/pipeline/comm/worker_backend.ts";
import { InProcessBackend } from "../src/pipeline/comm/in_process.ts";
import { ControlPlane } from "../src/pipeline/comm/control_plane.ts";
import type { Mode } from "./_transport_worker.ts";

// BroadcastChannel is measured up to this size only (4 s per hop at 16 MiB).
const BROADCAST_MAX = 1024 * 1024;
const SIZES = [64 * 1024, 1024 * 1024, 16 * 1024 * 1024];
const LABEL: Record<number, string> = {
  [64 * 1024]: "64 KiB",
  [1024 * 1024]: "1 MiB",
  [16 * 1024 * 1024]: "16 MiB",
};

/** One measurement: bytes per second (both directions) and time per one-way hop. */
export interface TransportRow {
  transport: string;
  bytes: number;
  gbps: number;
  hopMs: number;
}

const BATCHES = 5;

function rounds(bytes: number, mode: Mode | "set"): number {
  const budget = mode === "broadcast" ? 16 << 20 : 256 << 20;
  return Math.max(2, Math.min(100, Math.floor(budget / bytes / 2)));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/** Runs every transport at every size; workers are ended before it returns. */
export async function measureTransports(): Promise<TransportRow[]> {
  const runId = crypto.randomUUID();
  const control = new ControlPlane(runId, 2);
  const mesh = createPortMesh(2);
  const raw = new MessageChannel();
  const sab = new SharedArrayBuffer(8 + Math.max(...SIZES));
  const url = new URL("./_transport_worker.ts", import.meta.url).href;
  const workers = [0, 1].map(() => new Worker(url, { type: "module" }));
  const rows: TransportRow[] = [];
  try {
    const next = (w: Worker) =>
      new Promise<{ type: string; ms: number }>((resolve, reject) => {
        w.onmessage = (e) => resolve(e.data);
        w.onerror = (e) => {
          e.preventDefault();
          reject(new Error(e.message));
        };
      });
    const ready = workers.map(next);
    workers.forEach((w, rank) => {
      const ports = mesh[rank].filter((p): p is MessagePort => p !== null);
      const mine = rank === 0 ? raw.port1 : raw.port2;
      w.postMessage({ type: "init", rank, runId, mesh: mesh[rank], raw: mine, sab }, [
        ...ports,
        mine,
      ]);
    });
    await control.rendezvous();
    await Promise.all(ready);
    const modes: [Mode, string][] = [
      ["backend", "WorkerBackend (transfer)"],
      ["port", "postMessage (transfer)"],
      ["port-copy", "postMessage (copy)"],
      ["sab", "SAB set in/out, Atomics.wait"],
      ["sab-async", "SAB set in/out, waitAsync"],
      ["broadcast", "BroadcastChannel (copy)"],
    ];
    for (const bytes of SIZES) {
      // The control plane needs seconds per hop at 16 MiB: left out there.
      const here = modes.filter(([mode]) => mode !== "broadcast" || bytes <= BROADCAST_MAX);
      const go = async (mode: Mode, n: number) => {
        const done = workers.map(next);
        for (const w of workers) w.postMessage({ type: "go", mode, floats: bytes / 4, rounds: n });
        return (await Promise.all(done))[0].ms;
      };
      for (const [mode] of here) await go(mode, 2); // warm-up
      // The machine is shared, and a copying transport leaves garbage that the
      // next one pays for: batches rotate the order, and the median is kept.
      const perMode = new Map<Mode, number[]>(here.map(([mode]) => [mode, []]));
      for (let b = 0; b < BATCHES; b++) {
        for (let k = 0; k < here.length; k++) {
          const [mode] = here[(k + b) % here.length];
          perMode.get(mode)!.push(await go(mode, rounds(bytes, mode)));
        }
      }
      for (const [mode, transport] of here) {
        const n = rounds(bytes, mode);
        const ms = median(perMode.get(mode)!);
        rows.push({
          transport,
          bytes,
          gbps: (2 * n * bytes) / (ms / 1000) / 1e9,
          hopMs: ms / n / 2,
        });
      }
      const src = new Float32Array(bytes / 4).fill(1);
      const dst = new Float32Array(bytes / 4);
      const n = rounds(bytes, "set");
      dst.set(src);
      const batches: number[] = [];
      for (let b = 0; b < BATCHES; b++) {
        const t = performance.now();
        for (let i = 0; i < n; i++) dst.set(src);
        batches.push(performance.now() - t);
      }
      const ms = median(batches);
      rows.push({
        transport: "TypedArray.set (one thread)",
        bytes,
        gbps: (n * bytes) / (ms / 1000) / 1e9,
        hopMs: ms / n,
      });
    }
  } finally {
    for (const w of workers) w.terminate();
    raw.port1.close();
    raw.port2.close();
    await control.close();
  }
  return rows;
}

function table(rows: TransportRow[]): string {
  const names = [...new Set(rows.map((r) => r.transport))];
  const head = [
    "transport".padEnd(32),
    ...SIZES.map((s) => `${LABEL[s]} GB/s (ms/hop)`.padStart(24)),
  ];
  const lines = [head.join(" ")];
  for (const name of names) {
    const cells = SIZES.map((s) => {
      const r = rows.find((x) => x.transport === name && x.bytes === s);
      if (r === undefined) return "(not run)".padStart(24);
      return `${r.gbps.toFixed(2)} (${r.hopMs.toFixed(3)})`.padStart(24);
    });
    lines.push([name.padEnd(32), ...cells].join(" "));
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { json: { type: "boolean" } } });
  const rows = await measureTransports();
  if (values.json) { for (const r of rows) console.log(JSON.stringify(r)); }
  else {
    console.log(
      `ping-pong between two Deno workers; GB/s counts both directions; median of ${BATCHES} batches`,
    );
    console.log(table(rows));
  }
}

// In-thread costs as Deno.bench groups (workers are measured by the script above).
for (const bytes of SIZES) {
  const src = new Float32Array(bytes / 4).fill(1);
  const dst = new Float32Array(bytes / 4);
  Deno.bench({
    name: `TypedArray.set ${LABEL[bytes]}`,
    group: `copy ${LABEL[bytes]}`,
    baseline: true,
    fn: () => dst.set(src),
  });
  Deno.bench({
    name: `structuredClone (copy, as postMessage without transfer) ${LABEL[bytes]}`,
    group: `copy ${LABEL[bytes]}`,
    fn: () => {
      structuredClone(src);
    },
  });
  Deno.bench({
    name: `InProcessBackend send+recv (transfer) ${LABEL[bytes]}`,
    group: `copy ${LABEL[bytes]}`,
    async fn(b) {
      const [x, y] = InProcessBackend.createGroup(2);
      const a = new Float32Array(bytes / 4);
      b.start();
      await x.send(1, "t", a, { transfer: true });
      await y.recv(0, "t");
      b.end();
      x.close();
      y.close();
    },
  });
}
