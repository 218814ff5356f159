// The advisor on memory: with a limit that 1F1B exceeds it ranks first a
// schedule that fits (V-Min, V-Half), and with shardOptimizer D it counts
// 1/D of the optimizer state per rank; its bytes agree with what the ranks
// report (activations, and the optimizer state of a sharded run).

import assert from "node:assert/strict";
import { Linear } from "../../src/nn/linear.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { adviseSchedule } from "../../src/advise/advise.ts";
import { PipelineParallelModel } from "../../src/pipeline/model/pipeline_parallel_model.ts";
import { FixedPartition } from "../../src/pipeline/partition/partition.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";

const W = 16;
// Eight Linear layers (16 layers with the ReLUs): enough for 8 stages at 4 ranks.
function mlp(be: CpuBackend): Sequential {
  const layers = [];
  for (let i = 0; i < 8; i++) {
    layers.push(new Linear(be, i === 0 ? 8 : W, i === 7 ? 1 : W, { seed: i + 1 }));
    if (i < 7) layers.push(new ReLU(be));
  }
  return new Sequential(layers);
}
// Many rows: activations outweigh the parameters' bytes.
const ROWS = 512;
const sample = {
  inputs: new Float32Array(ROWS * 8).map((_, i) => Math.sin(i)),
  shape: [ROWS, 8],
  targets: new Float32Array(ROWS).map((_, i) => Math.cos(i)),
};
const QUICK = { repeats: 1, warmup: 0, calibrate: false, concurrent: false } as const;
const ADAMW = { kind: "adamw", lr: 1e-3, weightDecay: 0 } as const;

Deno.test("adviseSchedule with a memory limit that 1F1B exceeds ranks first a V schedule that fits (p = 4, m = 8)", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const o = {
      loss: "mse" as const,
      schedules: ["1f1b", "v-half", "v-min"],
      ranks: 4,
      microBatches: 8,
      optimizer: ADAMW,
      ...QUICK,
    };
    const free = await adviseSchedule(net, sample, o);
    const peak = (name: string) =>
      Math.max(...free.candidates.find((c) => c.schedule === name)!.peakBytes);
    assert.ok(peak("v-min") < peak("1f1b"), `v-min ${peak("v-min")} vs 1f1b ${peak("1f1b")}`);
    assert.ok(peak("v-half") < peak("1f1b"));
    const limit = Math.max(peak("v-min"), peak("v-half"));
    const tight = await adviseSchedule(net, sample, { ...o, memoryLimit: limit });
    assert.ok(tight.candidates[0].fits, "the first candidate fits");
    assert.notEqual(tight.candidates[0].schedule, "1f1b");
    assert.equal(tight.candidates.find((c) => c.schedule === "1f1b")!.fits, false);
  } finally {
    net.dispose();
  }
});

Deno.test("adviseSchedule shardOptimizer 2: half the optimizer state per rank; it and the activations within 10% of a sharded (2, P) run's reports", async () => {
  const be = new CpuBackend();
  const net = mlp(be);
  try {
    const o = {
      loss: "mse" as const,
      schedules: ["1f1b", "v-min"],
      ranks: 2,
      microBatches: 4,
      optimizer: ADAMW,
      ...QUICK,
    };
    const whole = await adviseSchedule(net, sample, o);
    const half = await adviseSchedule(net, sample, { ...o, shardOptimizer: 2 });
    for (const c of half.candidates) {
      const w = whole.candidates.find((x) => x.schedule === c.schedule)!;
      c.memory.forEach((m, r) => {
        assert.equal(m.optimizerState, w.memory[r].optimizerState / 2, `${c.schedule} rank ${r}`);
      });
      // The same schedule and cut, run with 2 replicas sharing the optimizer.
      const pipe = await PipelineParallelModel.create({
        model: net,
        schedule: c.generated!,
        partition: new FixedPartition(c.boundaries),
        optimizer: ADAMW,
        loss: "mse",
        backend: "cpu",
        rankGroup: "in-process",
        dataParallel: 2,
        shardOptimizer: true,
      });
      try {
        // Each replica trains on half the rows: the advisor's sample is one replica's batch.
        const both = {
          ...sample,
          inputs: new Float32Array([...sample.inputs, ...sample.inputs]),
          targets: new Float32Array([...sample.targets, ...sample.targets]),
          shape: [2 * ROWS, 8],
        };
        const step = await pipe.step(both);
        const info = await pipe.rankInfo();
        c.memory.forEach((m, r) => {
          const opt = info[r].optimizerBytes;
          assert.ok(
            Math.abs(m.optimizerState - opt) <= 0.1 * opt,
            `${c.schedule} rank ${r}: optimizer predicted ${m.optimizerState}, reported ${opt}`,
          );
          const act = step.peakActivationBytes[r];
          assert.ok(
            Math.abs(m.activations - act) <= 0.1 * act,
            `${c.schedule} rank ${r}: activations predicted ${m.activations}, reported ${act}`,
          );
        });
      } finally {
        await pipe.dispose();
      }
    }
  } finally {
    net.dispose();
  }
});
