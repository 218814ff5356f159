/**
 * Kernel throughput of Conveyor's WebGPU backend beside TensorFlow.js's
 * WebGPU backend, measured in the same process on the same adapter:
 * square matmul at n = 256, 512, 1024 (GFLOP/s) and elementwise add of 16M
 * floats (GB/s moved: two reads and one write per element).
 *
 *   deno run -A bench/kernels.ts          # a readable table
 *   deno run -A bench/kernels.ts --json   # one JSON object per line
 *
 * Each figure is the best of several samples; a sample records enough
 * operations back to back to last at least 0.5 s and ends by reading the
 * first row of the last result back to the CPU (the same for both
 * libraries: queued after all the work, it proves the work ran, and its
 * round trip, about 10 ms on llvmpipe, is a small share of a sample). TensorFlow.js is a bench-only dependency, loaded from npm
 * at run time and never imported by the package; when it cannot run, one
 * line says why instead of its figures.
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { createBackend, ops, type Tensor, WebGPUBackend } from "../tensor.ts";

interface Row {
  op: string;
  n: number;
  impl: string;
  gflops?: number;
  gbps?: number;
  ms: number;
}

interface Impl {
  readonly name: string;
  /** Records `reps` matmuls of n×n by n×n and waits for them. */
  matmul(n: number, reps: number): Promise<void>;
  /** Records `reps` adds of n floats and waits for them. */
  add(n: number, reps: number): Promise<void>;
  prepare(op: "matmul" | "add", n: number): Promise<void>;
  release(): void;
}

const values = benchArgs("bench/kernels.ts", {
  json: { type: "boolean", default: false },
  samples: { type: "string", default: "3" },
});
const SAMPLES = intFlag("bench/kernels.ts", "samples", values.samples);
if (!Number.isInteger(SAMPLES) || SAMPLES < 1) {
  throw new RangeError(`--samples must be a positive integer, got ${values.samples}`);
}
const MIN_SAMPLE_S = 0.5;

function fill(n: number, seed: number): Float32Array {
  const d = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    d[i] = s / 0x100000000 - 0.5;
  }
  return d;
}

/** Best seconds per operation: reps grow until a sample lasts MIN_SAMPLE_S. */
async function measure(run: (reps: number) => Promise<void>): Promise<number> {
  await run(1); // compile and warm up
  let reps = 1;
  for (;;) {
    const t0 = performance.now();
    await run(reps);
    const dt = (performance.now() - t0) / 1000;
    if (dt >= MIN_SAMPLE_S || reps >= 4096) break;
    reps *= Math.min(16, Math.max(2, Math.ceil(MIN_SAMPLE_S / Math.max(dt, 1e-4))));
  }
  let best = Infinity;
  for (let s = 0; s < SAMPLES; s++) {
    const t0 = performance.now();
    await run(reps);
    best = Math.min(best, (performance.now() - t0) / 1000 / reps);
  }
  return best;
}

/**
 * Runs `op` `reps` times, then reads back the first row of the last result:
 * queued after all the work, so it proves the work ran, yet small enough
 * that the read-back costs little more than its fixed round trip.
 */
async function repeat(reps: number, op: () => Tensor): Promise<void> {
  let last: Tensor | null = null;
  for (let i = 0; i < reps; i++) {
    last?.dispose();
    last = op();
  }
  const head = ops.sliceRows(last!, 0, 1);
  await head.toArray();
  head.dispose();
  last!.dispose();
}

function conveyorImpl(be: WebGPUBackend): Impl {
  let a: Tensor | null = null, b: Tensor | null = null;
  const release = () => {
    a?.dispose();
    b?.dispose();
    a = b = null;
  };
  return {
    name: "conveyor",
    prepare(op, n) {
      release();
      const shape = op === "matmul" ? [n, n] : [n];
      const size = op === "matmul" ? n * n : n;
      a = be.fromData(fill(size, 1), shape);
      b = be.fromData(fill(size, 2), shape);
      return be.sync();
    },
    matmul: (_n, reps) => repeat(reps, () => ops.matmul(a!, b!)),
    add: (_n, reps) => repeat(reps, () => ops.add(a!, b!)),
    release,
  };
}

// deno-lint-ignore no-explicit-any
type Tf = any;

async function tfjsImpl(): Promise<Impl | string> {
  let tf: Tf;
  try {
    // Bench-only dependency, pinned here rather than in deno.json so that the
    // package itself never depends on it.
    // deno-lint-ignore no-import-prefix
    tf = await import("npm:@tensorflow/tfjs-core@4.22.0");
    // deno-lint-ignore no-import-prefix
    await import("npm:@tensorflow/tfjs-backend-webgpu@4.22.0");
  } catch (e) {
    return `cannot load TensorFlow.js from npm: ${(e as Error).message}`;
  }
  try {
    if (!(await tf.setBackend("webgpu"))) return "tf.setBackend('webgpu') returned false";
    await tf.ready();
  } catch (e) {
    return `TensorFlow.js WebGPU backend failed to start: ${(e as Error).message}`;
  }
  const backend = tf.backend();
  const done = async () => {
    // tfjs records into its own encoder; there is none right after uploads.
    if (backend.commandEncoder != null) backend.submitQueue();
    await backend.device.queue.onSubmittedWorkDone();
  };
  // As `repeat` above: read back the first row of the last result only.
  const repeatTf = async (reps: number, op: () => Tf) => {
    let last: Tf = null;
    for (let i = 0; i < reps; i++) {
      last?.dispose();
      last = op();
    }
    const head = last.shape.length === 1
      ? tf.slice(last, [0], [1])
      : tf.slice(last, [0, 0], [1, -1]);
    await head.data();
    head.dispose();
    last.dispose();
  };
  let a: Tf = null, b: Tf = null;
  const release = () => {
    a?.dispose();
    b?.dispose();
    a = b = null;
  };
  return {
    name: "tfjs-webgpu",
    async prepare(op, n) {
      release();
      const shape = op === "matmul" ? [n, n] : [n];
      const size = op === "matmul" ? n * n : n;
      a = tf.tensor(fill(size, 1), shape);
      b = tf.tensor(fill(size, 2), shape);
      await done();
    },
    matmul: (_n, reps) => repeatTf(reps, () => tf.matMul(a, b)),
    add: (_n, reps) => repeatTf(reps, () => tf.add(a, b)),
    release,
  };
}

const round = (x: number, digits: number): number => Number(x.toFixed(digits));

function emit(row: Row): void {
  if (values.json) {
    const { gflops, gbps, ms, ...rest } = row;
    console.log(JSON.stringify({
      ...rest,
      ...(gflops !== undefined ? { gflops: round(gflops, 2) } : {}),
      ...(gbps !== undefined ? { gbps: round(gbps, 2) } : {}),
      ms: round(ms, 3),
    }));
  } else {
    const figure = row.gflops !== undefined
      ? `${row.gflops.toFixed(1).padStart(8)} GFLOP/s`
      : `${row.gbps!.toFixed(2).padStart(8)} GB/s   `;
    console.log(
      `${row.op.padEnd(7)} ${String(row.n).padStart(9)}  ${row.impl.padEnd(12)} ${figure}  ${
        row.ms.toFixed(3).padStart(9)
      } ms/op`,
    );
  }
}

const be = await createBackend("webgpu");
if (!(be instanceof WebGPUBackend)) throw new Error("expected the WebGPU backend");
const impls: Impl[] = [conveyorImpl(be)];
const tfjs = await tfjsImpl();
if (typeof tfjs === "string") {
  console.log(
    values.json
      ? JSON.stringify({ impl: "tfjs-webgpu", skipped: tfjs })
      : `tfjs-webgpu: not measured: ${tfjs}`,
  );
} else {
  impls.push(tfjs);
}

if (!values.json) {
  console.log(
    `adapter: ${be.description}; conveyor matmul variant for large n: ${
      JSON.stringify(be.matmulConfig)
    }`,
  );
  console.log("(timings on a shared machine are noisy: best of several samples)");
  console.log(
    `${"op".padEnd(7)} ${"n".padStart(9)}  ${"impl".padEnd(12)} ${"rate".padStart(16)}  ${
      "time".padStart(12)
    }`,
  );
}

for (const n of [256, 512, 1024]) {
  for (const impl of impls) {
    await impl.prepare("matmul", n);
    const s = await measure((reps) => impl.matmul(n, reps));
    emit({ op: "matmul", n, impl: impl.name, gflops: (2 * n ** 3) / s / 1e9, ms: s * 1000 });
  }
}
const N_ADD = 16 * 1024 * 1024;
for (const impl of impls) {
  await impl.prepare("add", N_ADD);
  const s = await measure((reps) => impl.add(N_ADD, reps));
  emit({ op: "add", n: N_ADD, impl: impl.name, gbps: (3 * 4 * N_ADD) / s / 1e9, ms: s * 1000 });
}
for (const impl of impls) impl.release();
await be.close();
