import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { ReLU } from "../../../src/nn/relu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { profileStageMemory } from "../../../src/pipeline/partition/stage_memory.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";

Deno.test("profileStageMemory: a Linear(4 → 8) on 16 rows, by hand", async () => {
  const be = new CpuBackend();
  const stage = new Sequential([new Linear(be, 4, 8, { seed: 1 })]);
  const x = be.zeros([16, 4]); // 16 · 4 · 4 = 256 bytes; an output row is 8 floats: 512 bytes
  const live = be.memory.liveBytes;
  try {
    const m = await profileStageMemory(stage, x);
    // F: the stage's copy of its input (256), x·Wᵀ (512), + bias into a new tensor (512),
    // then x·Wᵀ goes: 1280 at the peak. Kept: the input (W needs it), 256.
    assert.equal(m.forwardPeak, 256 + 512 + 512);
    assert.equal(m.afterForward, 256);
    // I: the incoming gradient (512) and dx = dy·W (256). Kept for W: x and dy.
    assert.equal(m.inputGradPeak, 512 + 256);
    assert.equal(m.afterInputGrad, 256 + 512);
    // W: dW (8 · 4 floats) is added into the gradient and freed before db (8 floats).
    assert.equal(m.weightGradPeak, 8 * 4 * 4);
    // B = I then W, on the same held bytes.
    assert.equal(m.backwardPeak, 512 + 256 + 128);
    // The first stage skips dx.
    const first = await profileStageMemory(stage, x, { first: true });
    assert.equal(first.inputGradPeak, 512);
    assert.equal(first.backwardPeak, 512 + 128);
    // Nothing is left behind, and the gradients are as before.
    assert.equal(be.memory.liveBytes, live);
    for (const p of stage.parameters()) {
      assert.ok((await p.grad.toArray()).every((v) => v === 0));
    }
    assert.deepEqual(stage.heldKeys(), []);
  } finally {
    x.dispose();
    stage.dispose();
  }
});

Deno.test("profileStageMemory: the last stage keeps its loss gradient until its backward", async () => {
  const be = new CpuBackend();
  const stage = new Sequential([new Linear(be, 4, 8, { seed: 1 }), new ReLU(be)]);
  const x = be.zeros([16, 4]);
  const t = be.zeros([16]);
  try {
    const plain = await profileStageMemory(stage, x);
    const last = await profileStageMemory(stage, x, { targets: t });
    // Beyond the layers' states: the logits' gradient (16 · 8 floats, 512 bytes) and the
    // loss value (one float) stay from F to the backward.
    assert.equal(last.afterForward - plain.afterForward, 512 + 4);
    // Its backward starts from that gradient instead of a received one.
    assert.ok(last.inputGradPeak < plain.inputGradPeak);
  } finally {
    x.dispose();
    t.dispose();
    stage.dispose();
  }
});

Deno.test("profileStageMemory: refuses what is not a layer, and a bad loss, before any work", async () => {
  const be = new CpuBackend();
  const x = be.zeros([2, 4]);
  try {
    await assert.rejects(
      () => profileStageMemory(null as unknown as Sequential, x),
      /stage must be a layer/,
    );
    const stage = new Sequential([new Linear(be, 4, 2)]);
    await assert.rejects(
      () => profileStageMemory(stage, x, { loss: "l1" as "mse" }),
      /loss must be "cross-entropy" or "mse", got "l1"/,
    );
    stage.dispose();
  } finally {
    x.dispose();
  }
});
