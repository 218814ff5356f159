import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { lcgData } from "../tensor/_helpers.ts";
import { registerActivationTests } from "./_layer_checks.ts";

// ReLU has a kink at 0: inputs keep |x| ≥ 0.1, far beyond the step eps = 1e-2; about a third negative.
const input = (be: Backend, seed: number): Tensor => {
  const d = lcgData(12, seed, 0.1, 1);
  for (let i = 0; i < d.length; i++) if ((i * 5 + seed) % 3 === 0) d[i] = -d[i];
  return be.fromData(d, [3, 4]);
};
await registerActivationTests("ReLU", (be) => new ReLU(be), input);
