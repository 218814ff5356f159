import assert from "node:assert/strict";
import { Rng } from "../../src/tensor/random.ts";
import { sampleBatch } from "../../src/nn/sample_batch.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";

const tokens = Array.from({ length: 50 }, (_, i) => (i * 7) % 11);

Deno.test("sampleBatch: each row is a window and its targets the window shifted by one", () => {
  const b = sampleBatch(tokens, 6, 8, new Rng(1));
  assert.deepEqual(b.shape, [6, 8]);
  for (let r = 0; r < 6; r++) {
    const row = b.ids.subarray(r * 8, r * 8 + 8);
    // Find the window's start (the token pattern has period 11, so check the run itself).
    const starts = [];
    for (let s = 0; s + 8 < tokens.length; s++) {
      if (row.every((v, t) => v === tokens[s + t])) starts.push(s);
    }
    assert.ok(starts.length > 0, `row ${r} is a window of the stream`);
    const s = starts[0];
    for (let t = 0; t < 8; t++) assert.equal(b.targets[r * 8 + t], tokens[s + t + 1]);
  }
});

Deno.test("sampleBatch: the same seed gives the same batch; every start can occur, the last included", () => {
  const a = sampleBatch(tokens, 4, 8, new Rng(9)), b = sampleBatch(tokens, 4, 8, new Rng(9));
  assert.deepEqual(a, b);
  // With seqLen = length − 1 the only start is 0; with a stream of distinct ids all starts show up.
  const one = sampleBatch([0, 1, 2, 3], 3, 3, new Rng(2));
  assert.deepEqual([...one.ids], [0, 1, 2, 0, 1, 2, 0, 1, 2]);
  const distinct = Array.from({ length: 12 }, (_, i) => i);
  const seen = new Set<number>();
  const big = sampleBatch(distinct, 400, 4, new Rng(5));
  for (let r = 0; r < 400; r++) seen.add(big.ids[r * 4]);
  assert.deepEqual([...seen].sort((x, y) => x - y), [0, 1, 2, 3, 4, 5, 6, 7]);
});

Deno.test("sampleBatch: bad sizes and a too-short stream are refused with the values", () => {
  const rng = new Rng(0);
  assertThrowsWith(() => sampleBatch(tokens, 0, 4, rng), RangeError, ["batch", "got 0"]);
  assertThrowsWith(() => sampleBatch(tokens, 2, -3, rng), RangeError, ["seqLen", "-3"]);
  assertThrowsWith(() => sampleBatch([1, 2, 3], 2, 3, rng), RangeError, [
    "seqLen + 1 = 4",
    "got 3",
  ]);
});

Deno.test("sampleBatch: inputs is ids (a TokenBatch is a training batch as it is); the old fields stay", () => {
  const b = sampleBatch(tokens, 3, 5, new Rng(4));
  assert.equal(b.inputs, b.ids);
  assert.deepEqual(Object.keys(b).sort(), ["ids", "inputs", "shape", "targets"]);
  assert.equal(b.inputs.length, 15);
});
