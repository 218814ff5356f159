// One rank of the MPI part of bench/transport_bench.ts (started by mpirun,
// 2 ranks): ping-pong through MpiBackend at each size, small-message latency,
// the CPU an idle waiting rank burns, and a raw MPI reference (MPI_Isend /
// MPI_Irecv completed by spinning on MPI_Test, one core busy), and the delay
// until a message that comes after a wait is delivered. Rank 0 prints
// one `ROW <json>` line per figure. Not a bench by itself.
//
//   mpirun -n 2 deno run --allow-ffi --allow-read bench/_mpi_transport_rank.ts <label> [pollMaxUs]

import { MpiBackend } from "../src/pipeline/comm/mpi_backend.ts";
import { openLibmpi } from "../src/pipeline/comm/_mpi_ffi.ts";

const SIZES = [64 * 1024, 1024 * 1024, 16 * 1024 * 1024];
const BATCHES = 5;
const label = Deno.args[0] ?? "mpi";
const pollMaxUs = Deno.args[1] === undefined ? undefined : Number(Deno.args[1]);
const sizesOnly = Deno.args.includes("--no-sizes");

function rounds(bytes: number): number {
  return Math.max(2, Math.min(100, Math.floor((256 << 20) / bytes / 2)));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

// CPU time of this process (all threads) in ms, from /proc/self/stat.
function cpuMs(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, 100 ticks/s
}

const comm = await MpiBackend.init(pollMaxUs === undefined ? {} : { pollMaxUs });
const { rank } = comm;
const peer = 1 - rank;
const row = (r: Record<string, unknown>) => {
  if (rank === 0) console.log(`ROW ${JSON.stringify({ label, ...r })}`);
};

// Ping-pong of `n` round trips of `floats` floats; rank 0's time in ms.
async function pingPong(floats: number, n: number, tag: string): Promise<number> {
  let a: Float32Array = new Float32Array(floats).fill(rank);
  await comm.barrier();
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    if (rank === 0) {
      await comm.send(peer, tag, a, { transfer: true });
      a = await comm.recv(peer, tag);
    } else {
      a = await comm.recv(peer, tag);
      await comm.send(peer, tag, a, { transfer: true });
    }
  }
  return performance.now() - t;
}

try {
  if (!sizesOnly) {
    for (const bytes of SIZES) {
      const n = rounds(bytes);
      await pingPong(bytes / 4, 2, "warm");
      const ms: number[] = [];
      for (let b = 0; b < BATCHES; b++) ms.push(await pingPong(bytes / 4, n, `s${bytes}`));
      const m = median(ms);
      row({ kind: "size", bytes, gbps: (2 * n * bytes) / (m / 1000) / 1e9, hopMs: m / n / 2 });
    }
  }
  // Small-message round trip (4 bytes).
  const lat: number[] = [];
  for (let b = 0; b < BATCHES; b++) lat.push(await pingPong(1, 200, "lat"));
  row({ kind: "latency", rttUs: median(lat) / 200 * 1000 });

  // Delivery delay of a message that comes after the receiver has waited a
  // while (10 ms: its polls have backed off to pollMaxUs): sent at a wall
  // clock time the message carries, received at another (same host).
  const wallMod = () => (performance.timeOrigin + performance.now()) % 100_000;
  const delays: number[] = [];
  for (let i = 0; i < 30; i++) {
    await comm.barrier();
    if (rank === 0) {
      await new Promise((r) => setTimeout(r, 10));
      await comm.send(1, "wake", new Float32Array([wallMod()]));
    } else {
      const sent = (await comm.recv(0, "wake"))[0];
      delays.push(((wallMod() - sent + 100_000) % 100_000) * 1000);
    }
  }
  if (rank === 1) {
    delays.sort((a, b) => a - b);
    await comm.send(0, "wake-result", new Float32Array([delays[15], delays[27]]));
  } else {
    const [median, p90] = await comm.recv(1, "wake-result");
    row({ kind: "wake", medianUs: median, p90Us: p90 });
  }

  // An idle rank waiting 2 s for a message: its CPU time.
  await comm.barrier();
  if (rank === 0) {
    await new Promise((r) => setTimeout(r, 2000));
    await comm.send(1, "idle", new Float32Array(1));
    const got = await comm.recv(1, "idle-cpu");
    row({ kind: "idle", cpuPercent: got[0] });
  } else {
    const c0 = cpuMs();
    const t0 = performance.now();
    await comm.recv(0, "idle");
    const pct = (cpuMs() - c0) / (performance.now() - t0) * 100;
    await comm.send(0, "idle-cpu", new Float32Array([pct]));
  }

  // Raw MPI on MPI_COMM_WORLD, completed by spinning on MPI_Test.
  if (!sizesOnly) {
    await comm.barrier();
    const mpi = openLibmpi({ path: comm.library }).symbols;
    const world = mpi.ompi_mpi_comm_world;
    const req = new BigUint64Array(1);
    const flag = new Int32Array(1);
    const status = new Uint8Array(24);
    const wait = () => {
      do mpi.MPI_Test(req, flag, status); while (flag[0] === 0);
    };
    const raw = (a: Float32Array, n: number): number => {
      const t = performance.now();
      for (let i = 0; i < n; i++) {
        if (rank === 0) {
          mpi.MPI_Isend(a, a.length, mpi.ompi_mpi_float, peer, 7, world, req);
          wait();
          mpi.MPI_Irecv(a, a.length, mpi.ompi_mpi_float, peer, 7, world, req);
          wait();
        } else {
          mpi.MPI_Irecv(a, a.length, mpi.ompi_mpi_float, peer, 7, world, req);
          wait();
          mpi.MPI_Isend(a, a.length, mpi.ompi_mpi_float, peer, 7, world, req);
          wait();
        }
      }
      return performance.now() - t;
    };
    for (const bytes of SIZES) {
      const a = new Float32Array(new ArrayBuffer(bytes));
      const n = rounds(bytes);
      raw(a, 2);
      const ms: number[] = [];
      for (let b = 0; b < BATCHES; b++) ms.push(raw(a, n));
      const m = median(ms);
      row({ kind: "raw", bytes, gbps: (2 * n * bytes) / (m / 1000) / 1e9, hopMs: m / n / 2 });
    }
    const one = new Float32Array(new ArrayBuffer(4));
    raw(one, 10);
    const lat: number[] = [];
    for (let b = 0; b < BATCHES; b++) lat.push(raw(one, 1000));
    row({ kind: "raw-latency", rttUs: median(lat) / 1000 * 1000 });
    await comm.barrier();
  }
} finally {
  comm.close();
}
