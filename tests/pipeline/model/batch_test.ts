// A batch's token ids are checked before any work, as NaN and shapes are:
// an id outside the first layer's vocabulary is refused by a RangeError
// naming the batch's row and position (not a micro-batch's), and the model
// stays usable, in this thread, in workers and across data-parallel
// replicas. Seen before: the id failed inside rank 0 and closed the model.

import assert from "node:assert/strict";
import { createTinyGPT } from "../../../src/nn/gpt.ts";
import { Embedding } from "../../../src/nn/embedding.ts";
import { Linear } from "../../../src/nn/linear.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { checkInputIds } from "../../../src/pipeline/model/batch.ts";
import { cpu } from "./_reference_training.ts";

const V = 11, T = 4, B = 4;

function batch(): { inputs: Float32Array; shape: number[]; targets: Float32Array } {
  const inputs = new Float32Array(B * T).map((_, i) => i % V);
  return { inputs, shape: [B, T], targets: new Float32Array(B * T).map((_, i) => (i + 1) % V) };
}

async function gpt(o: Partial<PipelineParallelModelOptions>): Promise<PipelineParallelModel> {
  const net = createTinyGPT({ vocabSize: V, seqLen: T, dim: 8, heads: 2, layers: 2, seed: 1 }, cpu);
  const m = await PipelineParallelModel.create({
    model: net,
    schedule: "1f1b",
    ranks: 2,
    microBatches: 2,
    optimizer: { kind: "sgd", lr: 0.1 },
    loss: "cross-entropy",
    backend: "cpu",
    ...o,
  });
  net.dispose();
  return m;
}

for (
  const [what, o] of [
    ["in this thread", { rankGroup: "in-process" }],
    ["in workers", { rankGroup: "workers" }],
    ["data-parallel, in this thread", { rankGroup: "in-process", dataParallel: 2 }],
  ] as const
) {
  Deno.test(`token ids (${what}): an id outside the vocabulary is refused before any work, naming row and position; the model trains on`, async () => {
    await using m = await gpt(o);
    const before = new Uint8Array(await m.checkpointBytes());
    const bad = batch();
    bad.inputs[9] = V; // row 2, position 1: in micro-batch 1, whose first row is 2
    await assert.rejects(
      () => m.train([bad]),
      (e: Error) => {
        assert.ok(e instanceof RangeError, String(e));
        assert.match(
          e.message,
          /inputs\[9\] \(row 2, position 1\) is 11: a token id of the first layer \(TokenPositionEmbedding\) must be an integer in \[0, 11\)/,
        );
        return true;
      },
    );
    assert.equal(m.closed, false);
    assert.equal(m.stepCount, 0);
    assert.deepEqual(new Uint8Array(await m.checkpointBytes()), before, "nothing changed");
    for (const v of [-1, 2.5]) {
      const b = batch();
      b.inputs[14] = v;
      await assert.rejects(() => m.train([b]), /inputs\[14\] \(row 3, position 2\) is/);
    }
    await assert.rejects(() => m.evaluate(bad), /batch\.inputs\[9\] \(row 2, position 1\) is 11/);
    await assert.rejects(
      () => m.predict({ inputs: bad.inputs, shape: bad.shape }),
      /predict: inputs\[9\] \(row 2, position 1\) is 11/,
    );
    const r = await m.train([batch()]);
    assert.equal(m.stepCount, 1);
    assert.ok(Number.isFinite(r.steps[0].loss), String(r.steps[0].loss));
  });
}

Deno.test("checkInputIds: an Embedding first layer, rows offset by firstRow; a model without ids is not checked", () => {
  const net = new Sequential([new Embedding(cpu, 5, 3, { seed: 1 }), new Linear(cpu, 3, 2)]);
  const ids = new Float32Array([0, 1, 2, 3, 4, 5]);
  assert.throws(
    () => checkInputIds(net, ids, [3, 2], "batch.inputs", 4),
    /^RangeError: batch\.inputs\[13\] \(row 6, position 1\) is 5: a token id of the first layer \(Embedding\) must be an integer in \[0, 5\)$/,
  );
  checkInputIds(net, ids.subarray(0, 5), [5], "x"); // one id per row: no position
  assert.throws(() => checkInputIds(net, new Float32Array([7]), [1], "x"), /x\[0\] \(row 0\) is 7/);
  const plain = new Sequential([new Linear(cpu, 2, 2)]);
  checkInputIds(plain, new Float32Array([99.5, -3]), [1, 2], "x");
  net.dispose();
  plain.dispose();
});
