import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { ReLU } from "../../../src/nn/relu.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { profileChunkMemory } from "../../../src/pipeline/partition/chunk_memory.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";

Deno.test("profileChunkMemory: a Linear(4 → 8) on 16 rows, by hand", async () => {
  const be = new CpuBackend();
  const chunk = new Sequential([new Linear(be, 4, 8, { seed: 1 })]);
  const x = be.zeros([16, 4]); // 16 · 4 · 4 = 256 bytes; an output row is 8 floats: 512 bytes
  const live = be.memory.liveBytes;
  try {
    const m = await profileChunkMemory(chunk, x);
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
    const first = await profileChunkMemory(chunk, x, { first: true });
    assert.equal(first.inputGradPeak, 512);
    assert.equal(first.backwardPeak, 512 + 128);
    // Nothing is left behind, and the gradients are as before.
    assert.equal(be.memory.liveBytes, live);
    for (const p of chunk.parameters()) {
      assert.ok((await p.grad.toArray()).every((v) => v === 0));
    }
    assert.deepEqual(chunk.heldKeys(), []);
  } finally {
    x.dispose();
    chunk.dispose();
  }
});

Deno.test("profileChunkMemory: the last chunk keeps its loss gradient until its backward", async () => {
  const be = new CpuBackend();
  const chunk = new Sequential([new Linear(be, 4, 8, { seed: 1 }), new ReLU(be)]);
  const x = be.zeros([16, 4]);
  const t = be.zeros([16]);
  try {
    const plain = await profileChunkMemory(chunk, x);
    const last = await profileChunkMemory(chunk, x, { targets: t });
    // Beyond the layers' states: the logits' gradient (16 · 8 floats, 512 bytes) and the
    // loss value (one float) stay from F to the backward.
    assert.equal(last.afterForward - plain.afterForward, 512 + 4);
    // Its backward starts from that gradient instead of a received one.
    assert.ok(last.inputGradPeak < plain.inputGradPeak);
  } finally {
    x.dispose();
    t.dispose();
    chunk.dispose();
  }
});

Deno.test("profileChunkMemory: refuses what is not a layer, and a bad loss, before any work", async () => {
  const be = new CpuBackend();
  const x = be.zeros([2, 4]);
  try {
    await assert.rejects(
      () => profileChunkMemory(null as unknown as Sequential, x),
      /chunk must be a layer/,
    );
    const chunk = new Sequential([new Linear(be, 4, 2)]);
    await assert.rejects(
      () => profileChunkMemory(chunk, x, { loss: "l1" as "mse" }),
      /loss must be "cross-entropy" or "mse", got "l1"/,
    );
    chunk.dispose();
  } finally {
    x.dispose();
  }
});
