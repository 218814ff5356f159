// The README's save-on-interrupt pattern: train until SIGINT, finish the
// window, save a checkpoint, dispose, exit 0. Prints "step <n>" per step
// and "saved <stepCount>" at the end. Usage:
//   deno run -A _interrupt_script.ts <workers|subprocess|in-process> <checkpoint path> [signal]

import { CpuBackend, Linear, PipelineParallelModel, ReLU, Sequential } from "../../../mod.ts";

const [rankGroup, path, signal = "SIGINT"] = Deno.args;
const be = new CpuBackend();
const net = new Sequential([
  new Linear(be, 2, 8, { seed: 1 }),
  new ReLU(be),
  new Linear(be, 8, 1, { seed: 2 }),
]);
const model = await PipelineParallelModel.create({
  model: net,
  schedule: "1f1b",
  ranks: 2,
  microBatches: 2,
  optimizer: { kind: "sgd", lr: 0.01 },
  loss: "mse",
  backend: "cpu",
  rankGroup: rankGroup as "workers" | "subprocess" | "in-process",
});
net.dispose();
const batch = {
  inputs: new Float32Array([0, 1, 1, 0, 1, 1, 0, 0]),
  shape: [4, 2],
  targets: new Float32Array([1, 1, 0, 0]),
};
function* batches() {
  for (let i = 0; i < 100_000; i++) yield batch;
}

const stop = new AbortController();
Deno.addSignalListener(signal as Deno.Signal, () => stop.abort()); // Ctrl-C: finish the window, then save
const r = await model.train(batches(), {
  signal: stop.signal,
  window: 1,
  onStep: (s) => console.log(`step ${s.step + 1}`),
});
await model.saveCheckpoint(path);
console.log(`saved ${model.stepCount} aborted ${r.aborted}`);
await model.dispose();
