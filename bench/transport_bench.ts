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
 * When `mpirun` (Open MPI) is installed, the same ping-pong runs between two
 * MPI processes (`mpirun -n 2`, `bench/_mpi_transport_rank.ts`) over shared
 * memory (`--mca btl vader,self`) and over TCP only (`--mca btl tcp,self`):
 *
 * - `MpiBackend` (what a rank group uses), and raw MPI_Isend/MPI_Irecv
 *   completed by spinning on MPI_Test (one core busy per rank: the floor of
 *   the polling design, and what it costs a neighbour on a small machine),
 * - the small-message round trip, the CPU an idle waiting rank burns, and a
 *   {@linkcode LinkModel} fitted to them with the simulator's `comm` delay it
 *   gives per message size (`messageDelay`).
 *
 * ```sh
 * deno run -A bench/transport_bench.ts               # table
 * deno run -A bench/transport_bench.ts --json        # one JSON object per line
 * deno run -A bench/transport_bench.ts --poll-sweep  # MPI latency / idle CPU per pollMaxUs
 * deno bench -A bench/transport_bench.ts             # Deno.bench groups (in-thread costs)
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { createPortMesh } from "../src/pipeline/comm/worker_backend.ts";
import { InProcessBackend } from "../src/pipeline/comm/in_process.ts";
import { ControlPlane } from "../src/pipeline/comm/control_plane.ts";
import type { Mode } from "./_transport_worker.ts";
import { linkFromSamples, type LinkModel, messageDelay } from "../src/pipeline/comm/link_model.ts";
import { type MpirunRows, mpirunRows } from "./_mpirun.ts";

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
    "transport".padEnd(36),
    ...SIZES.map((s) => `${LABEL[s]} GB/s (ms/hop)`.padStart(24)),
  ];
  const lines = [head.join(" ")];
  for (const name of names) {
    const cells = SIZES.map((s) => {
      const r = rows.find((x) => x.transport === name && x.bytes === s);
      if (r === undefined) return "(not run)".padStart(24);
      return `${r.gbps.toFixed(2)} (${r.hopMs.toFixed(3)})`.padStart(24);
    });
    lines.push([name.padEnd(36), ...cells].join(" "));
  }
  return lines.join("\n");
}

/** What one MPI job of the bench reports besides the per-size rows. */
export interface MpiFigures {
  /** Transport label: "shared memory" or "TCP". */
  transport: string;
  /** pollMaxUs the backend ran with (undefined: the default). */
  pollMaxUs?: number;
  /** MpiBackend round trip of a 4-byte message, µs. */
  rttUs: number;
  /** Raw MPI (MPI_Test spin) round trip of a 4-byte message, µs. */
  rawRttUs?: number;
  /** Send-to-delivery delay of a message arriving after a 10 ms wait: median and p90, µs. */
  wakeUs: [number, number];
  /** CPU of a rank waiting 2 s in `recv`, % of one core. */
  idleCpuPercent: number;
  /** Link fitted to the 4-byte round trip and the 16 MiB hop. */
  link?: LinkModel;
}

const MPI_RANK = new URL("./_mpi_transport_rank.ts", import.meta.url).pathname;

/**
 * Runs `bench/_mpi_transport_rank.ts` under `mpirun -n 2` with `btl`;
 * resolves with its `ROW` objects, or null when mpirun is not installed.
 */
async function mpiJob(btl: string, extra: string[]): Promise<Record<string, unknown>[] | null> {
  let out: MpirunRows;
  try {
    out = await mpirunRows(2, btl, MPI_RANK, [btl, ...extra]);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
  if (!out.success) throw new Error(`mpirun (${btl}) failed:\n${out.stdout}\n${out.stderr}`);
  return out.rows;
}

function wake(rows: Record<string, unknown>[]): [number, number] {
  const r = rows.find((x) => x.kind === "wake")!;
  return [r.medianUs as number, r.p90Us as number];
}

const MPI_TRANSPORTS: [string, string][] = [["vader,self", "shared memory"], ["tcp,self", "TCP"]];

/**
 * MPI rows (MpiBackend and raw MPI at each size, shared memory and TCP) and
 * per-transport figures; null when mpirun is not installed.
 */
export async function measureMpi(): Promise<
  { rows: TransportRow[]; figures: MpiFigures[] } | null
> {
  const rows: TransportRow[] = [];
  const figures: MpiFigures[] = [];
  for (const [btl, name] of MPI_TRANSPORTS) {
    const got = await mpiJob(btl, []);
    if (got === null) return null;
    const pick = (kind: string) => got.filter((r) => r.kind === kind);
    for (const r of pick("size")) {
      rows.push({
        transport: `MpiBackend, ${name}`,
        bytes: r.bytes as number,
        gbps: r.gbps as number,
        hopMs: r.hopMs as number,
      });
    }
    for (const r of pick("raw")) {
      rows.push({
        transport: `MPI + MPI_Test spin, ${name}`,
        bytes: r.bytes as number,
        gbps: r.gbps as number,
        hopMs: r.hopMs as number,
      });
    }
    const rttUs = pick("latency")[0].rttUs as number;
    const big = rows.find((r) => r.transport === `MpiBackend, ${name}` && r.bytes === 16 << 20)!;
    figures.push({
      transport: name,
      rttUs,
      rawRttUs: pick("raw-latency")[0]?.rttUs as number,
      wakeUs: wake(got),
      idleCpuPercent: pick("idle")[0].cpuPercent as number,
      link: linkFromSamples([{ bytes: 4, ms: rttUs / 2000 }, { bytes: big.bytes, ms: big.hopMs }]),
    });
  }
  return { rows, figures };
}

/** MpiBackend round trip and idle CPU over shared memory for each pollMaxUs; null without mpirun. */
export async function mpiPollSweep(
  values: readonly number[] = [100, 250, 1000, 4000],
): Promise<MpiFigures[] | null> {
  const out: MpiFigures[] = [];
  for (const pollMaxUs of values) {
    const got = await mpiJob("vader,self", [String(pollMaxUs), "--no-sizes"]);
    if (got === null) return null;
    out.push({
      transport: "shared memory",
      pollMaxUs,
      rttUs: got.find((r) => r.kind === "latency")!.rttUs as number,
      wakeUs: wake(got),
      idleCpuPercent: got.find((r) => r.kind === "idle")!.cpuPercent as number,
    });
  }
  return out;
}

function mpiSummary(figures: MpiFigures[]): string {
  const lines: string[] = [];
  for (const f of figures) {
    const link = f.link!;
    const delay = (bytes: number) => messageDelay(link, bytes).toFixed(3);
    const gbps = (link.bytesPerMs / 1e6).toFixed(2);
    lines.push(
      [
        `MPI ${f.transport}: 4-byte round trip ${f.rttUs.toFixed(0)} µs`,
        `(raw MPI_Test spin ${f.rawRttUs?.toFixed(1)} µs);`,
        `delivery after a 10 ms wait ${f.wakeUs[0].toFixed(0)} µs (p90 ${f.wakeUs[1].toFixed(0)});`,
        `idle waiting rank ${f.idleCpuPercent.toFixed(1)}% of a core;`,
        `link ${link.latencyMs.toFixed(3)} ms + n / ${gbps} GB/s`,
        `-> simulate comm per message: 64 KiB ${delay(64 << 10)} ms,`,
        `1 MiB ${delay(1 << 20)} ms, 16 MiB ${delay(16 << 20)} ms`,
      ].join(" "),
    );
  }
  return lines.join("\n");
}

function sweepTable(sweep: MpiFigures[]): string {
  const head = [
    "pollMaxUs",
    "4-byte round trip (µs)",
    "delivery after a 10 ms wait, median / p90 (µs)",
    "idle waiting rank (% of a core)",
  ];
  const lines = [head.join("  ")];
  for (const f of sweep) {
    const cells = [
      String(f.pollMaxUs),
      f.rttUs.toFixed(0),
      `${f.wakeUs[0].toFixed(0)} / ${f.wakeUs[1].toFixed(0)}`,
      f.idleCpuPercent.toFixed(1),
    ];
    lines.push(cells.map((c, i) => c.padStart(head[i].length)).join("  "));
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const values = benchArgs("bench/transport_bench.ts", {
    json: { type: "boolean" },
    "poll-sweep": { type: "boolean" },
  });
  if (values["poll-sweep"]) {
    const sweep = await mpiPollSweep();
    if (sweep === null) {
      console.log(
        "mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)",
      );
    } else if (values.json) {
      for (const f of sweep) console.log(JSON.stringify(f));
    } else {
      console.log("MpiBackend over shared memory, 2 ranks: pollMaxUs vs latency and idle CPU");
      console.log(sweepTable(sweep));
    }
    Deno.exit(0);
  }
  const rows = await measureTransports();
  const mpi = await measureMpi();
  if (mpi !== null) rows.push(...mpi.rows);
  if (values.json) {
    for (const r of rows) console.log(JSON.stringify(r));
    for (const f of mpi?.figures ?? []) console.log(JSON.stringify(f));
  } else {
    console.log(
      `ping-pong between two Deno workers (MPI: two processes); GB/s counts both directions; median of ${BATCHES} batches`,
    );
    console.log(table(rows));
    if (mpi === null) {
      console.log(
        "(mpirun not found: MPI rows left out; apt-get install openmpi-bin libopenmpi-dev)",
      );
    } else console.log(mpiSummary(mpi.figures));
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
