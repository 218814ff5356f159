import assert from "node:assert/strict";
import { rankBytes } from "../../../src/pipeline/analysis/rank_bytes.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";

Deno.test("rankBytes: a stage-micro-batch of a V schedule holds half a full stage's activations; v-half and v-min at p = 8, m = 32 hold at most 5 and 4 full stages' worth (1F1B: 8)", () => {
  const A = 1 << 20;
  const of = (name: string) => {
    const s = generateSchedule(name, { ranks: 8, microBatches: 32 });
    return Math.max(
      ...rankBytes(s, simulate(s).peakActivations, { activationBytes: A }).activations,
    );
  };
  assert.equal(of("1f1b"), 8 * A);
  assert.equal(of("zb-v"), 8 * A);
  assert.ok(of("v-half") <= 5 * A, `v-half ${of("v-half") / A}`);
  assert.ok(of("v-min") <= 4 * A, `v-min ${of("v-min") / A}`);
});

Deno.test("rankBytes: the optimizer state spread over the stages, 1/D per rank with shardOptimizer D", () => {
  const s = generateSchedule("interleaved-1f1b", { ranks: 2, microBatches: 4 });
  const peaks = simulate(s).peakActivations;
  const whole = rankBytes(s, peaks, { optimizerBytes: 800 });
  assert.deepEqual(whole.optimizer, [400, 400]);
  assert.deepEqual(rankBytes(s, peaks, { optimizerBytes: 800, shardOptimizer: 4 }).optimizer, [
    100,
    100,
  ]);
  assert.deepEqual(whole.activations, [0, 0]);
  assert.throws(
    () => rankBytes(s, peaks, { optimizerBytes: -1 }),
    /optimizerBytes must be a finite number of bytes >= 0, got -1/,
  );
  assert.throws(() => rankBytes(s, peaks, { shardOptimizer: 1.5 }), /got 1.5/);
  assert.throws(() => rankBytes(s, [1], {}), /one number per rank \(2\)/);
});
