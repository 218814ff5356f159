// One rank of an mpirun job started by mpi_backend_test.ts: joins with
// MpiBackend and plays one scenario (Deno.args[0]), printing
// `PID <rank> <pid>` at start and `RESULT <json>` with what it saw.
// `pattern` and `digest` are shared with the test.

import { MpiBackend } from "../../../src/pipeline/comm/mpi_backend.ts";
import { makeTag, type TagSpace } from "../../../src/pipeline/runtime/tag.ts";

/**
 * `n` floats whose bits are a deterministic function of (seed, i), with
 * special values mixed in: NaNs with payloads, ±0, ±Infinity, subnormals.
 */
export function pattern(seed: number, n: number): Float32Array {
  const out = new Float32Array(n);
  const bits = new Uint32Array(out.buffer);
  let x = (seed * 2654435761) >>> 0 || 1;
  const specials = [0x7fc00001, 0xffc12345, 0x80000000, 0x00000000, 0x7f800000, 0xff800000, 0x1];
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    bits[i] = i % 97 === 5 ? specials[((i - 5) / 97) % specials.length] : x;
  }
  return out;
}

/** FNV-1a over the bytes of `a` (hex). */
export function digest(a: Float32Array): string {
  const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193) >>> 0;
  return `${a.length}:${h.toString(16)}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const wall = () => performance.timeOrigin + performance.now();

/** Sizes (floats) sent by the contract scenario: empty, eager and rendezvous sizes. */
export const SIZES = [0, 1, 3, 1000, 70_000, 1 << 20];

async function contract(comm: MpiBackend): Promise<Record<string, unknown>> {
  const { rank, size } = comm;
  const out: Record<string, unknown> = { rank, size, tagUpperBound: comm.tagUpperBound };

  // 1. Exchange: everyone sends to everyone first, then receives in reverse
  // order (so messages wait for their recv), by string tags from makeTag.
  const spaces: TagSpace[] = ["activation", "gradient"];
  let detached = true;
  for (let q = 0; q < size; q++) {
    if (q === rank) continue;
    for (const space of spaces) {
      for (let mb = 0; mb < SIZES.length; mb++) {
        const tag = makeTag({ space, microBatch: mb, stage: q, iteration: 1 });
        const seed = rank * 1000 + q * 100 + mb * 2 + (space === "activation" ? 0 : 1);
        const a = pattern(seed, SIZES[mb]);
        await comm.send(q, tag, a, { transfer: true });
        detached &&= a.length === 0;
      }
    }
  }
  const got: Record<string, string> = {};
  for (let q = size - 1; q >= 0; q--) {
    if (q === rank) continue;
    for (const space of [...spaces].reverse()) {
      for (let mb = SIZES.length - 1; mb >= 0; mb--) {
        const tag = makeTag({ space, microBatch: mb, stage: rank, iteration: 1 });
        got[`${q}>${rank}:${tag}`] = digest(await comm.recv(q, tag));
      }
    }
  }
  out.exchange = got;
  out.detached = detached;

  // 2. FIFO per (peer, tag), with large and small messages interleaved (a
  // small one may complete before the large one sent before it).
  const next = (rank + 1) % size;
  const prev = (rank - 1 + size) % size;
  if (size > 1) {
    for (let i = 0; i < 24; i++) {
      const n = i % 3 === 0 ? 300_000 : 2;
      const a = new Float32Array(n).fill(i);
      await comm.send(next, "fifo", a, { transfer: i % 2 === 0 });
    }
    const order: number[] = [];
    for (let i = 0; i < 24; i++) {
      const a = await comm.recv(prev, "fifo");
      order.push(a[0], a.length, a.every((x) => x === i) ? i : -1);
    }
    out.fifo = order;
  }

  // 3. Arbitrary string tags, a copy that later writes cannot change, a view
  // whose neighbours stay usable, a promised array, a send to itself.
  if (size > 1) {
    const tags = ["norm/7", "ü/😀/ß", "x".repeat(10_000), "act/i0/c1/m3"];
    for (const [i, t] of tags.entries()) await comm.send(next, t, new Float32Array([i, rank]));
    const kept = new Float32Array([41, 42]);
    await comm.send(next, "copy", kept);
    kept[0] = -1;
    const whole = new Float32Array([6, 7, 8, 9]);
    await comm.send(next, "view", whole.subarray(1, 3), { transfer: true });
    out.viewNeighbours = [...whole];
    let release!: (a: Float32Array) => void;
    const readback = new Promise<Float32Array>((r) => release = r);
    const sent = comm.send(next, "later", readback, { transfer: true });
    setTimeout(() => release(new Float32Array([5, rank])), 30);
    await sent;
    const strTags: number[][] = [];
    for (const t of [...tags].reverse()) strTags.push([...await comm.recv(prev, t)]);
    out.stringTags = strTags;
    out.copy = [...await comm.recv(prev, "copy")];
    out.view = [...await comm.recv(prev, "view")];
    out.later = [...await comm.recv(prev, "later")];
  }
  await comm.send(rank, "self", new Float32Array([rank, 99]));
  out.self = [...await comm.recv(rank, "self")];

  // 4. Control messages reach every other rank, structured-clone style.
  const seen: string[] = [];
  let all!: () => void;
  const allSeen = new Promise<void>((r) => all = r);
  const off = comm.onControl((m, from) => {
    const extra = m.data instanceof Float32Array ? [...m.data].join(",") : "?";
    seen.push(`${m.type} from ${from} [${extra}] ${(m.map as Map<string, number>)?.get("k")}`);
    if (seen.length === size - 1) all();
  });
  await comm.barrier();
  comm.broadcastControl({
    type: "ping",
    data: new Float32Array([rank, 0.5]),
    map: new Map([["k", rank]]),
  });
  if (size > 1) await allSeen;
  off();
  out.control = seen.sort();
  let refused = "";
  try {
    comm.broadcastControl({ type: "bad", f: () => 1 });
  } catch (e) {
    refused = `${(e as Error).name}: ${(e as Error).message}`;
  }
  out.refused = refused;

  // 5. Barrier: nobody leaves before the last one arrives.
  await comm.barrier();
  await sleep(rank * 150);
  const before = wall();
  await comm.barrier();
  out.barrier = { before, after: wall() };
  await comm.barrier();
  return out;
}

async function main(): Promise<void> {
  const scenario = Deno.args[0];
  // kill-quiet: no heartbeats, so only mpirun's SIGTERM tells survivors.
  const heartbeatIntervalMs = scenario === "kill-quiet" ? 0 : 200;
  // A close handshake that never completes shows up as a job that does not end.
  // stop, spin, block: rank 1 goes silent; the bounds are kept short.
  const live = ["stop", "spin", "block"].includes(scenario);
  const comm = await MpiBackend.init({
    heartbeatIntervalMs,
    // Only the liveness scenarios test the stall bound; elsewhere a rank that
    // computes for seconds on a loaded machine (4 ranks on 2 cores and more
    // besides) must not be declared stalled.
    peerTimeoutMs: live ? 3000 : 60_000,
    ...(live ? { heartbeatTimeoutMs: 1000 } : {}),
    closeTimeoutMs: 600_000,
  });
  console.log(`PID ${comm.rank} ${Deno.pid}`);
  const { rank, size } = comm;
  const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify(r)}`);
  try {
    switch (scenario) {
      case "contract":
        report(await contract(comm));
        break;
      case "abort": {
        if (rank === 1) {
          await sleep(300);
          comm.abort("boom");
          const late = await comm.recv(0, "x").then(() => "resolved", (e: Error) => e.message);
          report({ rank, late, aborted: comm.aborted });
        } else {
          const error = await comm.recv(1, "never").then(
            () => "resolved?!",
            (e: Error) => `${e.name}: ${e.message}`,
          );
          const send = await comm.send(1, "x", new Float32Array(1)).then(
            () => "sent?!",
            (e: Error) => e.message,
          );
          report({ rank, error, send, aborted: comm.aborted });
        }
        break;
      }
      case "error": {
        if (rank === 1) {
          await sleep(300);
          comm.reportError({ type: "error", message: "kaboom in stage 1" });
          report({ rank, aborted: comm.aborted });
        } else {
          const error = await comm.barrier().then(() => "passed?!", (e: Error) => e.message);
          report({ rank, error });
        }
        break;
      }
      case "kill":
      case "kill-quiet": {
        // Rank 1 streams messages to every other rank until the test kills it:
        // 200 KB (sent by rendezvous: the receiver reads the sender's memory),
        // or with kill-quiet 400 bytes (sent eagerly), so that only SIGTERM
        // can tell the survivors.
        const floats = scenario === "kill" ? 50_000 : 100;
        if (rank === 1) {
          for (let i = 0;; i++) {
            for (let q = 0; q < size; q++) {
              if (q !== 1) await comm.send(q, "stream", new Float32Array(floats).fill(i));
            }
            if (i === 5) console.log("STREAMING");
            await sleep(20);
          }
        }
        try {
          for (;;) await comm.recv(1, "stream");
        } catch (e) {
          console.log(`FAILED ${rank} ${(e as Error).message}`);
          throw e;
        }
      }
      case "stop":
      case "spin":
      case "block": {
        // Rank 1 goes silent: stopped by the test (SIGSTOP), computing
        // without a break for 30 s, or blocked in a wait that never ends.
        if (rank === 1) {
          console.log("SILENT");
          if (scenario === "spin") {
            const until = performance.now() + 30_000;
            let x = 0;
            while (performance.now() < until) x = (x + Math.sqrt(x + 1)) % 1e6;
          } else if (scenario === "block") {
            Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
          }
        }
        try {
          await comm.recv(1, "never");
        } catch (e) {
          console.log(`FAILED ${rank} ${(e as Error).message}`);
          throw e;
        }
        break;
      }
      case "noclose": {
        // Never calls close: the backend finalises MPI on the unload event.
        const peer = (rank + 1) % size;
        await comm.send(peer, "x", new Float32Array(100_000).fill(rank));
        const got = await comm.recv((rank - 1 + size) % size, "x");
        report({ rank, got: got[0] });
        return;
      }
      case "setup": {
        comm.close();
        const again = await MpiBackend.init().then(
          () => "started again?!",
          (e: Error) => `${e.name}: ${e.message}`,
        );
        report({ rank, size, library: comm.library, again });
        break;
      }
      default:
        throw new Error(`unknown scenario ${scenario}`);
    }
  } finally {
    if (scenario !== "noclose") comm.close();
  }
}

if (import.meta.main) await main();
