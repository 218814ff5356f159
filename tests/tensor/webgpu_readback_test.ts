/**
 * The WebGPU read path (`src/tensor/webgpu/_readback.ts`,
 * `_device_reads.ts`): both paths read exactly, on the main thread and in a
 * worker; a map that is not done within the call falls back to awaiting;
 * and no buffer ever reaches `getMappedRange` before Deno knows a map mode
 * for it (that case kills the process, so it must be impossible, not
 * caught): every buffer the backend maps was created mapped.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Worker as NodeWorker } from "node:worker_threads";
import { WebGPUBackend } from "../../src/tensor/webgpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { GELU } from "../../src/nn/gelu.ts";
import { PipelineParallelModel } from "../../src/pipeline/model/pipeline_parallel_model.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { checkLateMapFallback, checkReads } from "./_readback_checks.ts";

// WebGPU where an adapter exists, unless the run asks for the CPU alone
// (then this module does not touch WebGPU at all: see tests/webgpu_test.ts).
const adapter = Deno.env.get("CONVEYOR_TEST_BACKENDS") === "cpu"
  ? null
  : await navigator.gpu?.requestAdapter().catch(() => null) ?? null;
const gpuTest = (name: string, fn: () => Promise<void>) => {
  if (adapter !== null) Deno.test(name, fn);
};

Deno.test("mapRead: a map not done within the mapAsync() call is awaited, then read; other errors are thrown", async () => {
  await checkLateMapFallback();
});

gpuTest(
  "webgpu read path (main thread): both paths read exactly; readSync, sync, marks and device checks",
  async () => {
    assert.equal(await checkReads("auto"), "immediate", "Deno 2.9's maps complete within the call");
    assert.equal(await checkReads("awaited"), "awaited");
  },
);

gpuTest("webgpu read path in a worker thread: the same checks pass there", async () => {
  const w = new NodeWorker(new URL("./_readback_worker.ts", import.meta.url));
  try {
    const r = await new Promise<{ ok: boolean; paths?: string[]; error?: string }>(
      (resolve, reject) => {
        w.once("message", resolve);
        w.once("error", reject);
      },
    );
    assert.ok(r.ok, r.error);
    assert.deepEqual(r.paths, ["immediate", "awaited"]);
  } finally {
    await w.terminate();
  }
});

gpuTest("webgpu: readPath is checked when the backend is created", async () => {
  await assert.rejects(
    () => WebGPUBackend.create({ matmul: "default", readPath: "fast" as "auto" }),
    (e) =>
      e instanceof RangeError && /readPath must be "auto" or "awaited", got "fast"/.test(e.message),
  );
});

gpuTest(
  "webgpu: no buffer reaches getMappedRange before Deno knows a map mode for it",
  async () => {
    // Deno knows a buffer's map mode once it was created mapped or a map of it settled.
    const known = new WeakSet<GPUBuffer>();
    const violations: string[] = [];
    let ranges = 0;
    const createBuffer = GPUDevice.prototype.createBuffer;
    const mapAsync = GPUBuffer.prototype.mapAsync;
    const getMappedRange = GPUBuffer.prototype.getMappedRange;
    GPUDevice.prototype.createBuffer = function (d: GPUBufferDescriptor): GPUBuffer {
      const b = createBuffer.call(this, d);
      if (d.mappedAtCreation === true) known.add(b);
      return b;
    };
    GPUBuffer.prototype.mapAsync = function (
      this: GPUBuffer,
      ...args: Parameters<GPUBuffer["mapAsync"]>
    ): Promise<undefined> {
      const p = mapAsync.apply(this, args);
      p.then(() => known.add(this), () => {});
      return p;
    };
    GPUBuffer.prototype.getMappedRange = function (
      this: GPUBuffer,
      ...args: Parameters<GPUBuffer["getMappedRange"]>
    ): ArrayBuffer {
      ranges++;
      if (!known.has(this)) violations.push(`a ${this.size}-byte buffer (usage ${this.usage})`);
      return getMappedRange.apply(this, args);
    };
    try {
      // Every kind of read-back: tensors of several sizes, readSync, sync,
      // marks, device checks, and a pipeline model trained on WebGPU.
      await checkReads("auto");
      const be = await WebGPUBackend.create({ matmul: "default" });
      const x = ops.scale(be.fromData(new Float32Array(300).fill(1), [300]), 2);
      x.tryToArraySync();
      be.timeMark();
      await be.sync();
      x.dispose();
      await be.close();
      // The layers are built on the CPU: their specs and weights travel to the ranks.
      const cpu = new CpuBackend();
      const net = new Sequential([
        new Linear(cpu, 4, 8, { seed: 1 }),
        new GELU(cpu),
        new Linear(cpu, 8, 2, { seed: 2 }),
      ]);
      const model = await PipelineParallelModel.create({
        model: net,
        schedule: "zb-h1",
        ranks: 2,
        microBatches: 2,
        optimizer: { kind: "sgd", lr: 0.1 },
        loss: "mse",
        backend: "webgpu",
        rankGroup: "in-process",
      });
      net.dispose();
      try {
        const r = await model.step({
          inputs: new Float32Array(16).fill(0.5),
          shape: [4, 4],
          targets: new Float32Array(8).fill(0.25),
        });
        assert.ok(Number.isFinite(r.loss));
      } finally {
        await model.dispose();
      }
    } finally {
      GPUDevice.prototype.createBuffer = createBuffer;
      GPUBuffer.prototype.mapAsync = mapAsync;
      GPUBuffer.prototype.getMappedRange = getMappedRange;
    }
    assert.ok(ranges > 20, `getMappedRange was called ${ranges} times`);
    assert.deepEqual(violations, []);
  },
);
