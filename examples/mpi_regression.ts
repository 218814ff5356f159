/**
 * `examples/regression_pipeline.ts` with one rank per MPI process: every
 * process runs this same script; each builds only its own stages. The
 * batches are made on rank 0 only (the other ranks pass null and rank 0
 * sends them what they need), every rank gets the same loss, and rank 0
 * prints it and writes the weights.
 *
 * ```sh
 * mpirun -n 2 deno run -A examples/mpi_regression.ts            # 2 processes, 2 stages
 * mpirun -n 4 --oversubscribe deno run -A examples/mpi_regression.ts out.safetensors
 * ```
 *
 * @module
 */

import {
  CpuBackend,
  GELU,
  Linear,
  PipelineParallelModel,
  Rng,
  Sequential,
  type TrainingBatch,
} from "../mod.ts";

const cpu = new CpuBackend();
const rng = new Rng(7); // the same seed everywhere: every process builds the same model
const net = new Sequential([
  new Linear(cpu, 2, 32, { rng }),
  new GELU(cpu),
  new Linear(cpu, 32, 32, { rng }),
  new GELU(cpu),
  new Linear(cpu, 32, 1, { rng }),
]);

const model = await PipelineParallelModel.create({
  model: net,
  schedule: "zb-h1",
  ranks: Number(Deno.env.get("OMPI_COMM_WORLD_SIZE") ?? "2"), // one rank per process
  microBatches: 4,
  optimizer: { kind: "adamw", lr: 1e-2 },
  loss: "mse",
  backend: "auto", // each process opens its own adapter (or the CPU)
  rankGroup: "mpi",
});
net.dispose();
const lead = model.localRank === 0;

const rows = 64;
const steps = Number(Deno.env.get("STEPS") ?? "200");
for (let step = 1; step <= steps; step++) {
  let batch: TrainingBatch | null = null;
  if (lead) {
    const inputs = new Float32Array(rows * 2), targets = new Float32Array(rows);
    for (let i = 0; i < rows; i++) {
      const a = 4 * rng.next() - 2, b = 2 * rng.next() - 1;
      inputs.set([a, b], 2 * i);
      targets[i] = Math.sin(a) + b * b;
    }
    batch = { inputs, shape: [rows, 2], targets };
  }
  const r = await model.step(batch); // every rank: the same loss
  if (lead && (step % 50 === 0 || step === steps)) {
    console.log(`step ${step}: loss ${r.loss.toFixed(4)}, bubble ${(100 * r.bubble).toFixed(0)}%`);
  }
}
const bytes = await model.saveSafetensors(); // every rank: the same file
if (lead && Deno.args[0] !== undefined) await Deno.writeFile(Deno.args[0], bytes);
await model.dispose();
