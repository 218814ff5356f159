import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { SiLU } from "../../src/nn/silu.ts";
import { registerActivationTests, uniform } from "./_layer_checks.ts";

const input = (be: Backend, seed: number): Tensor => uniform(be, [3, 4], seed, -3, 3);
await registerActivationTests("SiLU", (be) => new SiLU(be), input);
