// A user's model module for `cli.ts advise --model`: an MLP regression on a
// fixed batch. Its top level only defines; the default export builds.

import { Linear } from "../src/nn/linear.ts";
import { ReLU } from "../src/nn/relu.ts";
import { Sequential } from "../src/nn/sequential.ts";
import type { Backend } from "../src/tensor/mod.ts";
import type { AdviseModule } from "../analysis.ts";

/** Builds the MLP and its sample batch on `backend`. */
export default function createAdviseModel(backend: Backend): AdviseModule {
  const width = 32;
  const model = new Sequential([
    new Linear(backend, 8, width, { seed: 1 }),
    new ReLU(backend),
    new Linear(backend, width, width, { seed: 2 }),
    new ReLU(backend),
    new Linear(backend, width, width, { seed: 3 }),
    new ReLU(backend),
    new Linear(backend, width, 1, { seed: 4 }),
  ]);
  const rows = 16;
  const inputs = new Float32Array(rows * 8).map((_, i) => Math.sin(i));
  const targets = new Float32Array(rows).map((_, i) => Math.cos(i));
  return {
    model,
    sample: { inputs, shape: [rows, 8], targets },
    loss: "mse",
    optimizer: { kind: "sgd", lr: 0.01, momentum: 0.9 },
  };
}
