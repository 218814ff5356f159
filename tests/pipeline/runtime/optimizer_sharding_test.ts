import assert from "node:assert/strict";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import {
  reduceScatterAverage,
  type ShardedExecutor,
  ShardedSteps,
  shardRange,
} from "../../../src/pipeline/runtime/optimizer_sharding.ts";
import type { StepCheck } from "../../../src/pipeline/runtime/rank_executor.ts";

Deno.test("shardRange: D contiguous shares that cover the vector once and differ by at most one value", () => {
  for (const total of [0, 1, 5, 10, 1089]) {
    for (const d of [1, 2, 3, 4, 7]) {
      let at = 0;
      for (let k = 0; k < d; k++) {
        const { start, end } = shardRange(total, k, d);
        assert.equal(start, at);
        assert.ok(end - start === Math.floor(total / d) || end - start === Math.ceil(total / d));
        at = end;
      }
      assert.equal(at, total);
    }
  }
  assert.throws(() => shardRange(10, 2, 2), /replica must be an integer in \[0, 1\], got 2/);
  assert.throws(() => shardRange(-1, 0, 2), /total must be a non-negative integer, got -1/);
  assert.throws(() => shardRange(3, 0, 0), /replicas must be a positive integer, got 0/);
});

Deno.test("reduceScatterAverage: each of 3 replicas gets the f64 average of its share across parameters, in replica order; the rest untouched", async () => {
  const d = 3;
  const comms = InProcessBackend.createGroup(d);
  // Two parameters (4 + 3 values): shares [0, 2), [2, 4), [4, 7) cross the boundary.
  const grads = Array.from({ length: d }, (_, k) => [
    Float32Array.from([1, 2, 3, 4], (v) => v * (k + 1) + 0.1),
    Float32Array.from([5, 6, 7], (v) => v * (k + 1) + 0.1),
  ]);
  const before = grads.map((g) => g.map((a) => a.slice()));
  await Promise.all(
    comms.map((comm, k) =>
      reduceScatterAverage({ comm, replica: k, peers: [0, 1, 2] }, 1, 0, 0, grads[k])
    ),
  );
  const flat = (gs: Float32Array[]) => [...gs[0], ...gs[1]];
  const avg = flat(before[0]).map((_, i) =>
    Math.fround((flat(before[0])[i] + flat(before[1])[i] + flat(before[2])[i]) / 3)
  );
  for (let k = 0; k < d; k++) {
    const { start, end } = shardRange(7, k, d);
    const got = flat(grads[k]);
    for (let i = 0; i < 7; i++) {
      assert.equal(
        got[i],
        i >= start && i < end ? avg[i] : flat(before[k])[i],
        `replica ${k} value ${i}`,
      );
    }
  }
  for (const c of comms) c.close();
});

Deno.test("ShardedSteps: each step's shares gathered into every replica; checks combined (finite only if all are, norms summed in replica order); a redo gathers again", async () => {
  const comms = InProcessBackend.createGroup(2);
  const total = 5;
  const params = [new Float32Array(total), new Float32Array(total)];
  let redone = 0;
  const ranks = comms.map((comm, k) => {
    const sync = new ShardedSteps({ comm, replica: k, peers: [0, 1] });
    sync.setTotal(3, total);
    const { start, end } = shardRange(total, k, 2);
    const check: StepCheck = k === 1
      ? { finite: false, what: "gradient", normSquared: Infinity }
      : { finite: true, normSquared: 2 };
    const ex = sync.wrap<ShardedExecutor>({
      step: () => ({ check: Promise.resolve(check) }),
      redoStep: () => void redone++,
      ownedParameters: () =>
        Float32Array.from({ length: end - start }, (_, i) => 10 * (redone + 1) + start + i),
      setStageParameters: (_s, v) => void params[k].set(v),
    });
    return { sync, ex };
  });
  const checks = await Promise.all(ranks.map(async ({ ex }) => {
    const out = await ex.step(3, 7) as { check: Promise<StepCheck> };
    return await out.check;
  }));
  await Promise.all(ranks.map(({ sync }) => sync.settle()));
  for (const c of checks) {
    assert.deepEqual(c, { finite: false, what: "gradient", normSquared: Infinity });
  }
  assert.deepEqual([...params[0]], [10, 11, 12, 13, 14]);
  assert.deepEqual([...params[1]], [10, 11, 12, 13, 14]);
  await Promise.all(ranks.map(({ ex }) => ex.redoStep!(3, 7, 0.5)));
  await Promise.all(ranks.map(({ sync }) => sync.settle()));
  assert.equal(redone, 2);
  // Both replicas' redone shares (redone = 1 after the first, 2 after the second).
  assert.equal(params[0][4], params[1][4]);
  assert.ok(params[0][0] > 10);
  for (const c of comms) c.close();
});

Deno.test("ShardedSteps: an executor without ownedParameters or setStageParameters is refused at once", () => {
  const [comm] = InProcessBackend.createGroup(1);
  const sync = new ShardedSteps({ comm, replica: 0, peers: [0] });
  assert.throws(
    () => sync.wrap({ step: () => undefined } as ShardedExecutor),
    /a sharded optimizer needs an executor with ownedParameters\(stage\) and setStageParameters/,
  );
  comm.close();
});
