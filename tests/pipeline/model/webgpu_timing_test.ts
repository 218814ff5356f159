// On WebGPU a rank's calls only record commands: its events must still
// cover the device's execution, at every P including 1, where nothing else
// paces the rank (steps back to back once collapsed to ~0 ms each).

import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { GELU } from "../../../src/nn/gelu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Rng } from "../../../src/tensor/random.ts";
import { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpu } from "./_reference_training.ts";

const hasGpu = Deno.env.get("CONVEYOR_TEST_BACKENDS") !== "cpu" &&
  (await navigator.gpu?.requestAdapter().catch(() => null)) != null;

if (hasGpu) {
  Deno.test("WebGPU, P = 1 and 2: every step's events cover device work; no step collapses to 0 ms", async () => {
    const rng = new Rng(3);
    const batches = Array.from({ length: 4 }, () => ({
      inputs: new Float32Array(64 * 256).map(() => rng.next()),
      shape: [64, 256],
      targets: new Float32Array(64 * 256).map(() => rng.next()),
    }));
    for (const ranks of [1, 2]) {
      const net = new Sequential([
        new Linear(cpu, 256, 256, { seed: 1 }),
        new GELU(cpu),
        new Linear(cpu, 256, 256, { seed: 2 }),
        new GELU(cpu),
      ]);
      const model = await PipelineParallelModel.create({
        model: net,
        schedule: "1f1b",
        ranks,
        microBatches: 4,
        optimizer: { kind: "sgd", lr: 0.01 },
        loss: "mse",
        backend: "webgpu",
        rankGroup: "in-process",
      });
      net.dispose();
      try {
        await model.train(batches.slice(0, 1));
        const r = await model.train(batches);
        const spans = r.steps.map((s) => s.makespanMs);
        const median = [...spans].sort((a, b) => a - b)[1];
        for (const s of r.steps) {
          assert.ok(s.makespanMs > 0.25 * median, `P=${ranks}: makespans ${spans.join(", ")}`);
          for (const e of s.events) {
            assert.ok(e.end > e.start, `P=${ranks}: an event of step ${s.step} lasts 0 ms`);
          }
        }
        // Within a rank, device work never overlaps itself.
        for (let rank = 0; rank < ranks; rank++) {
          const ev = r.events.filter((e) => e.rank === rank).sort((a, b) => a.start - b.start);
          for (let i = 1; i < ev.length; i++) {
            assert.ok(ev[i].start >= ev[i - 1].end - 1e-6, `rank ${rank}: events overlap`);
          }
        }
      } finally {
        await model.dispose();
      }
    }
  });
}
