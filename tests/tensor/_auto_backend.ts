// Run by create_backend_test.ts in a fresh process (the "auto" notice is said
// once per process): replaces navigator.gpu by a fake as the first argument
// says, resolves "auto" several times (and, with "model", builds a
// two-rank pipeline in workers with backend "auto"), and prints the kinds
// chosen as one JSON line on stdout.
//   deno run -A tests/tensor/_auto_backend.ts software|hardware|fallback|none|null [model]

import { chooseBackend, createBackend } from "../../src/tensor/create_backend.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { PipelineParallelModel } from "../../src/pipeline/model/pipeline_parallel_model.ts";

const INFOS: Record<string, Partial<GPUAdapterInfo>> = {
  software: { vendor: "65541", description: "llvmpipe (LLVM 15.0.6, 256 bits)" },
  hardware: { vendor: "nvidia", architecture: "hopper", description: "NVIDIA H200" },
  // A fallback adapter whose name says nothing.
  fallback: { vendor: "acme", description: "Acme Graphics", isFallbackAdapter: true },
};

const [mode, what] = Deno.args;
const info = INFOS[mode];
const fake = mode === "none" ? undefined : {
  requestAdapter: () =>
    Promise.resolve(
      info === undefined ? null : {
        info,
        // A real backend is never created on the fake hardware adapter.
        requestDevice: () => Promise.reject(new Error("fake adapter")),
      },
    ),
};
Object.defineProperty(Navigator.prototype, "gpu", { configurable: true, get: () => fake });

const kinds: string[] = [];
for (let i = 0; i < 3; i++) kinds.push((await chooseBackend("auto")).kind);
if (mode !== "hardware") kinds.push((await createBackend("auto")).name);
if (what === "model") {
  const be = new CpuBackend();
  const net = new Sequential([
    new Linear(be, 2, 2, { seed: 1 }),
    new Linear(be, 2, 1, { seed: 2 }),
  ]);
  await using model = await PipelineParallelModel.create({
    model: net,
    schedule: "1f1b",
    ranks: 2,
    microBatches: 2,
    optimizer: { kind: "sgd", lr: 0.1 },
    loss: "mse",
    rankGroup: "workers",
  });
  net.dispose();
  for (const r of await model.rankInfo()) kinds.push(r.backend);
}
console.log(JSON.stringify(kinds));
