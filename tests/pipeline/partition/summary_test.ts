import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { ReLU } from "../../../src/nn/relu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { createTinyGPT } from "../../../src/nn/gpt.ts";
import { summary } from "../../../src/pipeline/partition/summary.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";

Deno.test("summary: layers, shapes, parameters and bytes per stage, by hand", () => {
  const be = new CpuBackend();
  const net = new Sequential([
    new Linear(be, 10, 20),
    new ReLU(be),
    new Linear(be, 20, 30, { bias: false }),
    new Linear(be, 30, 5),
  ]);
  try {
    const s = summary(net, {
      inputShape: [7, 10],
      boundaries: [0, 2, 4],
      stageToRank: [1, 0],
      optimizer: { kind: "sgd", lr: 0.1, momentum: 0.9 },
    });
    assert.deepEqual(s.layers.map((l) => [l.name, l.kind, l.outputShape, l.params, l.stage]), [
      ["0", "Linear", [7, 20], 10 * 20 + 20, 0],
      ["1", "ReLU", [7, 20], 0, 0],
      ["2", "Linear", [7, 30], 20 * 30, 1],
      ["3", "Linear", [7, 5], 30 * 5 + 5, 1],
    ]);
    assert.deepEqual(s.stages[0], {
      stage: 0,
      rank: 1,
      layers: [0, 2],
      params: 220,
      parameterBytes: 880,
      gradientBytes: 880,
      optimizerStateBytes: 880, // one momentum buffer per parameter
      outputShape: [7, 20],
      outputBytes: 7 * 20 * 4,
    });
    assert.equal(s.stages[1].params, 755);
    assert.equal(s.stages[1].rank, 0);
    assert.equal(s.totalParams, 975);
    assert.equal(s.totalBytes, 975 * 4 * 3);
    assert.match(s.text, /^_+\nLayer \(type\)\s+Output shape\s+Param #\n=+\n/);
    assert.match(s.text, /stage 0 \(rank 1\): layers 0–1\n0 \(Linear\)\s+\[7, 20\]\s+220\n/);
    assert.match(s.text, /hands on \[7, 20\] \(560 B\)/);
    assert.match(s.text, /outputs \[7, 5\]/);
    assert.match(s.text, /Total params: 975 \(11\.4 KiB with gradients and optimizer state\)$/);
    // One stage and no optimizer by default.
    const one = summary(net, { inputShape: [1, 10] });
    assert.equal(one.stages.length, 1);
    assert.equal(one.stages[0].optimizerStateBytes, 0);
    assert.equal(one.totalBytes, 975 * 4 * 2);
  } finally {
    net.dispose();
  }
});

Deno.test("summary: the tiny GPT's parameters add up to the model's", () => {
  const be = new CpuBackend();
  const gpt = createTinyGPT(
    { vocabSize: 65, seqLen: 64, dim: 32, heads: 4, layers: 3, seed: 1 },
    be,
  );
  try {
    const s = summary(gpt, { inputShape: [4, 64], boundaries: [0, 2, 3, 6] });
    const all = gpt.parameters().reduce((a, p) => a + p.value.size, 0);
    assert.equal(s.totalParams, all);
    assert.deepEqual(s.stages[2].outputShape, [4, 64, 65]);
  } finally {
    gpt.dispose();
  }
});

Deno.test("summary: bad shapes, boundaries and placements are refused with the value", () => {
  const be = new CpuBackend();
  const net = new Sequential([new Linear(be, 4, 4), new Linear(be, 4, 2)]);
  try {
    assert.throws(() => summary(net, { inputShape: [2, 5] }), /inFeatures = 4/);
    assert.throws(
      () => summary(net, { inputShape: [2, 4], boundaries: [0, 3] }),
      /end at numLayers = 2/,
    );
    assert.throws(
      () => summary(net, { inputShape: [2, 4], boundaries: [0, 1, 2], stageToRank: [0] }),
      /one rank .* per stage \(2\)/,
    );
    assert.throws(() => summary({} as Sequential, { inputShape: [2, 4] }), /Sequential/);
    assert.throws(
      () => summary(net, { inputShape: [2, 4], optimizer: { kind: "lion" } as never }),
      /optimizer/,
    );
  } finally {
    net.dispose();
  }
});
