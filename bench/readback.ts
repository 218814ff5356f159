/**
 * WebGPU read-back latency: the read path that takes the data as soon as
 * Deno's `mapAsync()` returns ("immediate", the default where detected)
 * beside the awaiting path ("awaited": `await mapAsync()`, which Deno 2.9
 * settles only after a fixed 10 ms sleep), measured in the same run,
 * interleaved in blocks of five calls per path (each after one unmeasured
 * call), as medians with their spread (min–max).
 *
 * Rows:
 * - `op + read` at 4 KiB, 64 KiB, 1 MiB and 16 MiB: one elementwise op on a
 *   tensor of that size, then `toArray()`.
 * - `sync`: `backend.sync()` right after an op (the fence every step and
 *   every iteration end of a pipeline rank waits on).
 * - `hand-over` at 4 KiB and 64 KiB: two workers, each with its own device,
 *   pass a tensor back and forth; one hand-over = upload, op, read-back,
 *   transfer (half a round trip).
 * - `MLP step`: a training step of a 512-1024-1024-16 ReLU MLP on a batch of
 *   256 (forward, cross-entropy, backward, SGD, the loss read back).
 *
 * ```sh
 * deno run -A bench/readback.ts            # Markdown table and a verdict line
 * deno run -A bench/readback.ts --json     # one JSON object per row and path
 * deno run -A bench/readback.ts --rounds 60
 * ```
 *
 * Goals (llvmpipe, this repository's 2-core machine): the immediate path's
 * median ≤ 0.5 ms for `op + read` at ≤ 64 KiB and ≤ 1 ms per hand-over, and
 * the MLP step no slower than on the awaiting path.
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { WebGPUBackend } from "../src/tensor/webgpu/backend.ts";
import type { Tensor } from "../src/tensor/tensor.ts";
import * as ops from "../src/tensor/ops.ts";
import { Rng } from "../src/tensor/random.ts";
import { Linear } from "../src/nn/linear.ts";
import { ReLU } from "../src/nn/relu.ts";
import { Sequential } from "../src/nn/sequential.ts";
import { SGD } from "../src/nn/sgd.ts";
import { crossEntropyLoss } from "../src/nn/losses.ts";

type Path = "immediate" | "awaited";
const PATHS: readonly Path[] = ["immediate", "awaited"];

/** One measured row of one path (`--json` prints these). */
export interface ReadbackRow {
  readonly what: string;
  readonly bytes: number;
  readonly path: Path;
  readonly medianMs: number;
  readonly minMs: number;
  readonly maxMs: number;
  readonly n: number;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function row(what: string, bytes: number, path: Path, ms: readonly number[]): ReadbackRow {
  return {
    what,
    bytes,
    path,
    medianMs: median(ms),
    minMs: Math.min(...ms),
    maxMs: Math.max(...ms),
    n: ms.length,
  };
}

// Runs `one(path)` `rounds` times per path, in blocks of BLOCK measured
// calls that alternate between the paths, each block after one unmeasured
// call: while one path waits (10 ms per awaited read) the adapter's threads
// go to sleep, and the first call after that pays their wake-up, which a
// device kept busy does not.
const BLOCK = 5;
async function interleaved(
  rounds: number,
  one: (path: Path) => Promise<number>,
): Promise<Record<Path, number[]>> {
  const ms: Record<Path, number[]> = { immediate: [], awaited: [] };
  for (let b = 0; ms.immediate.length < rounds; b++) {
    for (const p of b % 2 === 0 ? PATHS : [...PATHS].reverse()) {
      await one(p);
      for (let i = 0; i < BLOCK && ms[p].length < rounds; i++) ms[p].push(await one(p));
    }
  }
  return ms;
}

/** Op + read-back and sync latency on one device per path. */
async function deviceRows(rounds: number): Promise<ReadbackRow[]> {
  const be: Record<Path, WebGPUBackend> = {
    immediate: await WebGPUBackend.create({ matmul: "default" }),
    awaited: await WebGPUBackend.create({ matmul: "default", readPath: "awaited" }),
  };
  if (be.immediate.readPath !== "immediate") {
    console.error(`note: this Deno's maps are not immediate (readPath ${be.immediate.readPath})`);
  }
  const rows: ReadbackRow[] = [];
  try {
    for (const bytes of [4 << 10, 64 << 10, 1 << 20, 16 << 20]) {
      const n = bytes / 4;
      const x = {
        immediate: be.immediate.fromData(new Float32Array(n).fill(1), [n]),
        awaited: be.awaited.fromData(new Float32Array(n).fill(1), [n]),
      };
      const opRead = async (p: Path) => {
        const t0 = performance.now();
        const y = ops.scale(x[p], 2);
        const d = await y.toArray();
        const dt = performance.now() - t0;
        y.dispose();
        if (d[n - 1] !== 2) throw new Error(`read ${d[n - 1]} at ${n - 1}, expected 2`);
        return dt;
      };
      await opRead("immediate");
      await opRead("awaited");
      const big = bytes >= 16 << 20;
      const ms = await interleaved(big ? Math.max(4, rounds >> 2) : rounds, opRead);
      for (const p of PATHS) rows.push(row("op + read", bytes, p, ms[p]));
      if (bytes === 64 << 10) {
        const sync = await interleaved(rounds, async (p) => {
          const y = ops.scale(x[p], 2);
          const t0 = performance.now();
          await be[p].sync();
          const dt = performance.now() - t0;
          y.dispose();
          return dt;
        });
        for (const p of PATHS) rows.push(row("sync", 0, p, sync[p]));
      }
      x.immediate.dispose();
      x.awaited.dispose();
    }
  } finally {
    await be.immediate.close();
    await be.awaited.close();
  }
  return rows;
}

interface Pair {
  readonly driver: Worker;
  readonly echo: Worker;
}

function reply<T>(w: Worker, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    w.onmessage = (e: MessageEvent<{ type: string } & T>) => {
      if (e.data.type === type) resolve(e.data);
    };
    w.onerror = (e) => {
      e.preventDefault();
      reject(new Error(`readback worker: ${e.message}`));
    };
  });
}

async function startPair(path: Path): Promise<Pair> {
  const url = new URL("./_readback_worker.ts", import.meta.url);
  const pair = {
    driver: new Worker(url, { type: "module" }),
    echo: new Worker(url, { type: "module" }),
  };
  const { port1, port2 } = new MessageChannel();
  const readPath = path === "immediate" ? "auto" : "awaited";
  const ready = [reply(pair.driver, "ready"), reply(pair.echo, "ready")];
  pair.driver.postMessage({ type: "init", role: "driver", port: port1, readPath }, [port1]);
  pair.echo.postMessage({ type: "init", role: "echo", port: port2, readPath }, [port2]);
  await Promise.all(ready);
  return pair;
}

/** Hand-overs between two workers per path, in alternating batches. */
async function handOverRows(rounds: number): Promise<ReadbackRow[]> {
  const pairs: Record<Path, Pair> = {
    immediate: await startPair("immediate"),
    awaited: await startPair("awaited"),
  };
  const rows: ReadbackRow[] = [];
  try {
    for (const bytes of [4 << 10, 64 << 10]) {
      const ms: Record<Path, number[]> = { immediate: [], awaited: [] };
      const batches = 4;
      for (let b = 0; b < batches; b++) {
        for (const p of b % 2 === 0 ? PATHS : [...PATHS].reverse()) {
          const done = reply<{ ms: number[] }>(pairs[p].driver, "done");
          pairs[p].driver.postMessage({
            type: "go",
            floats: bytes / 4,
            trips: Math.ceil(rounds / batches / 2),
          });
          ms[p].push(...(await done).ms);
        }
      }
      for (const p of PATHS) rows.push(row("hand-over", bytes, p, ms[p]));
    }
  } finally {
    for (const p of PATHS) {
      pairs[p].driver.terminate();
      pairs[p].echo.terminate();
    }
  }
  return rows;
}

// The MLP training step on one device per path.
async function mlpRows(steps: number): Promise<ReadbackRow[]> {
  const batch = 256;
  const setup = async (path: Path) => {
    const be = await WebGPUBackend.create({
      readPath: path === "immediate" ? "auto" : "awaited",
    });
    const rng = new Rng(1);
    const net = new Sequential([
      new Linear(be, 512, 1024, { rng }),
      new ReLU(be),
      new Linear(be, 1024, 1024, { rng }),
      new ReLU(be),
      new Linear(be, 1024, 16, { rng }),
    ]);
    const opt = new SGD(net.parameters(), { lr: 0.01 });
    const x = be.fromData(new Float32Array(batch * 512).map(() => rng.normal()), [batch, 512]);
    const t = be.fromData(new Float32Array(batch).map((_, i) => i % 16), [batch]);
    return { be, net, opt, x, t };
  };
  const nets = { immediate: await setup("immediate"), awaited: await setup("awaited") };
  const step = async (p: Path) => {
    const { net, opt, x, t } = nets[p];
    const t0 = performance.now();
    const y = net.forward(x, { training: true });
    const { loss, grad } = crossEntropyLoss(y, t);
    y.dispose();
    const dx: Tensor = net.backward(grad);
    grad.dispose();
    dx.dispose();
    opt.step();
    opt.zeroGrad();
    const l = (await loss.toArray())[0];
    loss.dispose();
    if (!Number.isFinite(l)) throw new Error(`MLP loss ${l}`);
    return performance.now() - t0;
  };
  try {
    for (let i = 0; i < 2; i++) {
      await step("immediate");
      await step("awaited");
    }
    const ms = await interleaved(steps, step);
    return PATHS.map((p) => row("MLP step 512-1024-1024-16, batch 256", 0, p, ms[p]));
  } finally {
    for (const p of PATHS) {
      const { be, net, opt, x, t } = nets[p];
      x.dispose();
      t.dispose();
      opt.dispose();
      net.dispose();
      await be.close();
    }
  }
}

function size(bytes: number): string {
  if (bytes === 0) return "—";
  return bytes >= 1 << 20 ? `${bytes >> 20} MiB` : `${bytes >> 10} KiB`;
}

function cell(r: ReadbackRow): string {
  const f = (x: number) => x < 10 ? x.toFixed(2) : x.toFixed(1);
  return `${f(r.medianMs)} (${f(r.minMs)}–${f(r.maxMs)})`;
}

/** The rows as a Markdown table, both paths side by side. */
export function readbackTable(rows: readonly ReadbackRow[]): string {
  const lines = [
    "| what | size | immediate ms, median (min–max) | awaited ms, median (min–max) | awaited / immediate |",
    "| :--- | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    if (r.path !== "immediate") continue;
    const a = rows.find((o) => o.what === r.what && o.bytes === r.bytes && o.path === "awaited")!;
    lines.push(
      `| ${r.what} | ${size(r.bytes)} | ${cell(r)} | ${cell(a)} | ${
        (a.medianMs / r.medianMs).toFixed(1)
      }x |`,
    );
  }
  return lines.join("\n");
}

/** PASS when the goals of the module doc hold, else FAIL naming the misses. */
export function readbackVerdict(rows: readonly ReadbackRow[]): string {
  const misses: string[] = [];
  for (const r of rows) {
    if (r.path !== "immediate") continue;
    const limit = r.what === "op + read" && r.bytes <= 64 << 10
      ? 0.5
      : r.what === "hand-over"
      ? 1
      : undefined;
    if (limit !== undefined && !(r.medianMs <= limit)) {
      misses.push(`${r.what} ${size(r.bytes)} ${r.medianMs.toFixed(2)} ms > ${limit} ms`);
    }
    if (r.what.startsWith("MLP")) {
      const a = rows.find((o) => o.what === r.what && o.path === "awaited")!;
      if (!(r.medianMs <= a.medianMs)) {
        misses.push(`MLP step ${r.medianMs.toFixed(1)} ms > awaited ${a.medianMs.toFixed(1)} ms`);
      }
    }
  }
  return `verdict: ${misses.length === 0 ? "PASS" : "FAIL"} (goals: op + read <= 0.5 ms ` +
    `at <= 64 KiB, hand-over <= 1 ms, MLP step no slower than awaited)` +
    (misses.length === 0 ? "" : `: ${misses.join("; ")}`);
}

if (import.meta.main) {
  const values = benchArgs("bench/readback.ts", {
    rounds: { type: "string", default: "40" },
    steps: { type: "string", default: "12" },
    json: { type: "boolean", default: false },
  });
  const rounds = intFlag("bench/readback.ts", "rounds", values.rounds);
  const steps = intFlag("bench/readback.ts", "steps", values.steps);
  for (const [flag, v] of [["rounds", rounds], ["steps", steps]] as const) {
    if (!Number.isInteger(v) || v < 4) {
      throw new RangeError(`--${flag} must be an integer >= 4, got "${values[flag]}"`);
    }
  }
  const rows = [
    ...await deviceRows(rounds),
    ...await handOverRows(rounds),
    ...await mlpRows(steps),
  ];
  if (values.json) {
    for (const r of rows) console.log(JSON.stringify(r));
  } else {
    const probe = await WebGPUBackend.create({ matmul: "default" });
    console.log(
      `${probe.description}, ${navigator.hardwareConcurrency} cores, LP_NUM_THREADS=${
        Deno.env.get("LP_NUM_THREADS") ?? "unset"
      }; ${rounds} rounds per path, in alternating blocks of 5\n`,
    );
    await probe.close();
    console.log(readbackTable(rows));
    console.log();
    console.log(readbackVerdict(rows));
  }
}
