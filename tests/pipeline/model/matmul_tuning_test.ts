import assert from "node:assert/strict";
import { tuneMatmulForRanks } from "../../../src/pipeline/model/matmul_tuning.ts";
import { WebGPUBackend } from "../../../src/tensor/webgpu/mod.ts";
import type { MatmulConfig } from "../../../src/tensor/mod.ts";

Deno.test("tuneMatmulForRanks: nothing to tune for CPU ranks", async () => {
  assert.equal(await tuneMatmulForRanks("cpu"), undefined);
});

// WebGPU where an adapter exists, unless the run asks for the CPU alone.
const hasGpu = Deno.env.get("CONVEYOR_TEST_BACKENDS") !== "cpu" &&
  (await navigator.gpu?.requestAdapter().catch(() => null)) != null;

if (hasGpu) {
  Deno.test("tuneMatmulForRanks: gives the variant a WebGPU backend of this adapter would tune", async () => {
    for (const kind of ["webgpu", "auto"] as const) {
      const config = await tuneMatmulForRanks(kind);
      assert.ok(config !== undefined, `${kind}: llvmpipe is an adapter`);
      const be = await WebGPUBackend.create();
      try {
        assert.deepEqual(config, be.matmulConfig);
      } finally {
        await be.close();
      }
    }
  });
}

if (hasGpu) {
  Deno.test("WebGPUBackend.create: tunedMatmul is taken as the tuning's result, without timing", async () => {
    const tuned: MatmulConfig = { family: "direct", tm: 16, tn: 16, wx: 8, wy: 4 };
    const be = await WebGPUBackend.create({ tunedMatmul: tuned });
    try {
      assert.deepEqual(be.matmulConfig, tuned);
      assert.equal(be.tuneResults.length, 0, "no candidate was timed");
    } finally {
      await be.close();
    }
    await assert.rejects(
      WebGPUBackend.create({ tunedMatmul: { ...tuned, tm: 6 } }),
      (e: Error) =>
        e instanceof RangeError && /tm must be a positive multiple of 4/.test(e.message),
    );
  });
}
