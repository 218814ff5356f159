/**
 * Deno.bench groups for the tensor kernels: the CPU reference beside the
 * WebGPU backend on a small matmul and an elementwise add.
 *
 *   deno bench -A bench/kernels_bench.ts
 *
 * Every WebGPU iteration records 8 operations and waits until the GPU has
 * finished them, so the figures include the submit round trip (about 10 ms
 * on llvmpipe) exactly as a caller awaiting a result would see it; the CPU
 * iterations run the same 8 operations synchronously. For throughput at
 * larger sizes, beside TensorFlow.js, run `deno run -A bench/kernels.ts`.
 * Without a WebGPU adapter only the CPU benches run.
 *
 * @module
 */

import { CpuBackend } from "../mod.ts";
import { ops, type Tensor, WebGPUBackend } from "../tensor.ts";

const OPS_PER_ITERATION = 8;
const cpu = new CpuBackend();
let gpu: WebGPUBackend | null = null;
try {
  gpu = await WebGPUBackend.create();
} catch (e) {
  console.error(`kernels_bench: WebGPU unavailable (${(e as Error).message}); CPU only`);
}

function data(n: number): Float32Array {
  const d = new Float32Array(n);
  for (let i = 0; i < n; i++) d[i] = ((i * 7919) % 1000) / 1000 - 0.5;
  return d;
}

function run(op: () => Tensor): void {
  for (let i = 0; i < OPS_PER_ITERATION; i++) op().dispose();
}

const MM = 128;
const mmData = data(MM * MM);
const ca = cpu.fromData(mmData, [MM, MM]);

Deno.bench({
  name: `cpu matmul ${MM}x${MM}x${MM} ×${OPS_PER_ITERATION}`,
  group: "matmul",
  baseline: true,
  fn: () => run(() => ops.matmul(ca, ca)),
});

const ADD = 1 << 20;
const addData = data(ADD);
const cx = cpu.fromData(addData, [ADD]);

Deno.bench({
  name: `cpu add 1M floats ×${OPS_PER_ITERATION}`,
  group: "add",
  baseline: true,
  fn: () => run(() => ops.add(cx, cx)),
});

if (gpu !== null) {
  const be = gpu;
  const ga = be.fromData(mmData, [MM, MM]);
  const gx = be.fromData(addData, [ADD]);
  // Compile the pipelines before timing.
  ops.matmul(ga, ga).dispose();
  ops.add(gx, gx).dispose();
  await be.sync();

  Deno.bench({
    name: `webgpu matmul ${MM}x${MM}x${MM} ×${OPS_PER_ITERATION} + sync`,
    group: "matmul",
    fn: async () => {
      run(() => ops.matmul(ga, ga));
      await be.sync();
    },
  });

  Deno.bench({
    name: `webgpu add 1M floats ×${OPS_PER_ITERATION} + sync`,
    group: "add",
    fn: async () => {
      run(() => ops.add(gx, gx));
      await be.sync();
    },
  });
}
