/**
 * Using Conveyor from your own script: a small MLP fitted to y = sin(x0) + x1²
 * with mean squared error, cut into 2 pipeline stages (one Deno worker each)
 * and trained with the ZB-H1 schedule. The README shows this file.
 *
 * ```sh
 * deno run -A examples/regression_pipeline.ts
 * ```
 *
 * @module
 */

import { CpuBackend, GELU, Linear, PipelineParallelModel, Rng, Sequential } from "../mod.ts";

const cpu = new CpuBackend();
const rng = new Rng(7);
const net = new Sequential([
  new Linear(cpu, 2, 32, { rng }),
  new GELU(cpu),
  new Linear(cpu, 32, 32, { rng }),
  new GELU(cpu),
  new Linear(cpu, 32, 1, { rng }),
]);

const model = await PipelineParallelModel.create({
  model: net, // its layer specs and weights are copied into the workers
  schedule: "zb-h1",
  ranks: 2,
  microBatches: 4,
  optimizer: { kind: "adamw", lr: 1e-2 },
  loss: "mse",
  backend: "auto", // WebGPU on a GPU, else the CPU backend (the choice is said on stderr)
});
net.dispose();

const rows = 64;
for (let step = 1; step <= 200; step++) {
  const inputs = new Float32Array(rows * 2), targets = new Float32Array(rows);
  for (let i = 0; i < rows; i++) {
    const a = 4 * rng.next() - 2, b = 2 * rng.next() - 1;
    inputs.set([a, b], 2 * i);
    targets[i] = Math.sin(a) + b * b;
  }
  const r = await model.step({ inputs, shape: [rows, 2], targets });
  if (step % 50 === 0) {
    console.log(`step ${step}: loss ${r.loss.toFixed(4)}, bubble ${(100 * r.bubble).toFixed(0)}%`);
  }
}
await model.dispose(); // ends every worker
