/**
 * WebGPU in `deno bench`, two groups:
 *
 * - read-back: an elementwise op on 64 KiB then `toArray()`, on the read
 *   path that takes the data as soon as Deno's `mapAsync()` returns (the
 *   default) against the awaiting path (`readPath: "awaited"`), whose
 *   promise Deno 2.9 settles only after a fixed 10 ms sleep;
 * - pipeline: one training step of a small GPT (dim 64, 2 blocks as 4
 *   residual halves, an 8 × 32 batch, m = 4) on WebGPU, P = 2 ranks in
 *   workers, per schedule, gpipe as the baseline.
 *
 * Skipped (with a line saying so) where no WebGPU adapter exists. For the
 * tables with spreads and speedups against one rank, see
 * `bench/readback.ts` and `bench/pipeline_speedup.ts --backend webgpu`.
 *
 * ```sh
 * deno bench -A bench/webgpu_bench.ts
 * LP_NUM_THREADS=1 deno bench -A bench/webgpu_bench.ts   # one llvmpipe thread per device
 * ```
 *
 * @module
 */

import { WebGPUBackend } from "../src/tensor/webgpu/backend.ts";
import type { Tensor } from "../src/tensor/tensor.ts";
import * as ops from "../src/tensor/ops.ts";
import { createRealPipeline, REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const adapter = await navigator.gpu?.requestAdapter().catch(() => null) ?? null;
if (adapter === null) {
  console.error("webgpu_bench: no WebGPU adapter here; its benches are skipped");
}
const ignore = adapter === null;

const READ_GROUP = "webgpu read-back: op + toArray, 64 KiB";
const floats = (64 << 10) / 4;
const devices = new Map<string, { be: WebGPUBackend; x: Tensor }>();

async function device(path: "auto" | "awaited"): Promise<{ be: WebGPUBackend; x: Tensor }> {
  let d = devices.get(path);
  if (d === undefined) {
    const be = await WebGPUBackend.create({ matmul: "default", readPath: path });
    d = { be, x: be.fromData(new Float32Array(floats).fill(1), [floats]) };
    devices.set(path, d);
  }
  return d;
}

for (const path of ["auto", "awaited"] as const) {
  Deno.bench({
    name: path === "auto" ? "immediate (default)" : "awaited",
    group: READ_GROUP,
    baseline: path === "auto",
    ignore,
    async fn(b) {
      const { x } = await device(path);
      b.start();
      const y = ops.scale(x, 2);
      await y.toArray();
      b.end();
      y.dispose();
    },
  });
}

const CFG = {
  ...REAL_COMPUTE,
  backend: "webgpu" as const,
  dim: 64,
  layers: 2,
  batch: 8,
  seqLen: 32,
  microBatches: 4,
};
const PIPE_GROUP = "webgpu pipeline: small GPT, P=2 workers, one step";
let seed = 1;

// Each call starts its pipeline and disposes it outside the timed region,
// so that no worker thread that used WebGPU is alive when the process ends.
for (const name of ["gpipe", "1f1b", "zb-h1", "zb-v"]) {
  Deno.bench({
    name,
    group: PIPE_GROUP,
    baseline: name === "gpipe",
    ignore,
    n: 3,
    warmup: 1,
    async fn(b) {
      const model = await createRealPipeline(CFG, name, 2);
      try {
        await model.train(realBatches(CFG, 1, 99)); // warm: kernels compile
        const batches = realBatches(CFG, 1, seed++);
        b.start();
        await model.train(batches);
        b.end();
      } finally {
        await model.dispose();
      }
    },
  });
}

// The read-back devices are closed before the process ends (an unload
// handler cannot wait: close() refuses further work at once and releases
// the device once its queued work is done, if the process is still there).
globalThis.addEventListener("unload", () => {
  for (const { be, x } of devices.values()) {
    x.dispose();
    be.close().catch(() => {});
  }
});
