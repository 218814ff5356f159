import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { Tanh } from "../../src/nn/tanh.ts";
import { registerActivationTests, uniform } from "./_layer_checks.ts";

const input = (be: Backend, seed: number): Tensor => uniform(be, [3, 4], seed, -2, 2);
await registerActivationTests("Tanh", (be) => new Tanh(be), input);
