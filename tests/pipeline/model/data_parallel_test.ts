// Data × pipeline parallelism (`dataParallel: D`): D replicas of a P-rank
// pipeline, each step's batch cut into D equal shards, each stage's
// gradients averaged across its replicas before it steps. Training equals
// single-device training on the whole batch, and the replicas never
// diverge.

import assert from "node:assert/strict";
import { Linear } from "../../../src/nn/linear.ts";
import { GELU } from "../../../src/nn/gelu.ts";
import { Dropout } from "../../../src/nn/dropout.ts";
import { Sequential } from "../../../src/nn/sequential.ts";
import { Rng } from "../../../src/tensor/random.ts";
import { SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import type {
  PipelineParallelModel,
  PipelineParallelModelOptions,
  TrainingBatch,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import type { RankGroup } from "../../../src/pipeline/runtime/rank_group.ts";
import type { ModelStageCalls } from "../../../src/pipeline/model/stage_calls.ts";
import { callReplicasAgreeing } from "../../../src/pipeline/model/_every_rank.ts";
import { PipelineRankError } from "../../../src/pipeline/runtime/pipeline_rank_error.ts";
import { withFaultInjection } from "../../../src/pipeline/runtime/fault_injection.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { cpu, cpuModel, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";

// Every tensor within 1e-5 of its largest entry, every loss within 1e-5. (The
// bound was 1e-6 while the CPU backend summed in f64; it sums in f32 now,
// and a replica sums its shard's gradients before the average where one
// device sums the whole batch's: another order, measured 1.5e-6.)
const TOL = 1e-5;
const M = 4; // micro-batches per replica
const ROWS = 16; // 8 rows a shard at D = 2, 4 at D = 4
const SGD: OptimizerSpec = { kind: "sgd", lr: 0.1, momentum: 0.9 };
const GRID = [[2, 1], [2, 2], [4, 1]] as const;

const gptBatches = tokenBatches(3, ROWS);
const gptRef = await referenceTraining(gpt(), SGD, gptBatches);

// A small MLP with Dropout: its masks follow each row of the whole batch.
function mlp(): Sequential {
  return new Sequential([
    new Linear(cpu, 4, 16, { seed: 1 }),
    new GELU(cpu),
    new Dropout(cpu, 0.3, { seed: 11 }),
    new Linear(cpu, 16, 16, { seed: 2 }),
    new GELU(cpu),
    new Linear(cpu, 16, 2, { seed: 3 }),
  ]);
}
const rng = new Rng(5);
const mlpBatches: TrainingBatch[] = Array.from({ length: 3 }, () => ({
  inputs: new Float32Array(ROWS * 4).map(() => rng.next() * 2 - 1),
  shape: [ROWS, 4],
  targets: new Float32Array(ROWS * 2).map(() => rng.next()),
}));
const mlpRef = await (async () => {
  const single = mlp();
  try {
    return await referenceTraining(single, SGD, mlpBatches, "mse");
  } finally {
    single.dispose();
  }
})();

type Options = Partial<PipelineParallelModelOptions>;

// Trains, checking after every step that the replicas agree bit for bit
// (saving gathers every replica's weights and training state and refuses
// any difference), then compares with the single-device reference.
async function expectSingleDevice(
  options: Options,
  batches: readonly TrainingBatch[],
  ref: { losses: number[]; tensors: Map<string, Float32Array> },
  label: string,
  newNet?: () => Sequential,
): Promise<void> {
  const m: PipelineParallelModel = await cpuModel(
    { microBatches: M, optimizer: SGD, ...options },
    newNet,
  );
  try {
    let checked = 0;
    const r = await m.train(batches, {
      onStep: async () => {
        await m.saveSafetensors();
        await m.checkpointBytes();
        checked++;
      },
    });
    assert.equal(checked, batches.length, `${label}: every step checked`);
    const err = paramError(tensorsOf(await m.saveSafetensors()), ref.tensors);
    assert.ok(err.worst <= TOL, `${label}: ${err.worstName} off by ${err.worst} relative`);
    const lossErr = maxRelative(r.steps.map((s) => s.loss), ref.losses);
    assert.ok(lossErr <= TOL, `${label}: losses off by ${lossErr}`);
    assert.equal(new Set(r.events.map((e) => e.rank)).size, m.ranks * m.dataParallel);
  } finally {
    await m.dispose();
  }
}

for (const [d, p] of GRID) {
  Deno.test(`in-process, (D, P) = (${d}, ${p}): every schedule equals single-device SGD on the whole batch (tiny GPT, rel ${TOL}); replicas identical after every step`, async () => {
    for (const name of SCHEDULE_NAMES) {
      await expectSingleDevice(
        { schedule: name, ranks: p, dataParallel: d },
        gptBatches,
        gptRef,
        `${name} at (${d}, ${p})`,
      );
    }
  });
}

Deno.test("in-process: an MLP with Dropout at (D, P) = (2, 2) and (4, 1) equals single-device training (shards keep their rows' masks)", async () => {
  for (
    const [d, p, name] of [[2, 2, "zb-h1"], [4, 1, "1f1b"], [2, 2, "interleaved-1f1b"]] as const
  ) {
    await expectSingleDevice(
      { schedule: name, ranks: p, dataParallel: d, loss: "mse", inputShape: [1, 4] },
      mlpBatches,
      mlpRef,
      `${name} at (${d}, ${p})`,
      mlp,
    );
  }
});

Deno.test("a batch that cannot be cut into D equal shards is refused before any work, naming rows and D", async () => {
  const m = await cpuModel({ schedule: "1f1b", microBatches: 2, optimizer: SGD, dataParallel: 2 });
  try {
    const before = tensorsOf(await m.saveSafetensors());
    const [b] = tokenBatches(1, 7);
    await assert.rejects(
      () => m.train([gptBatches[0], b]),
      (e: Error) =>
        e instanceof RangeError && /7 rows/.test(e.message) && /2 equal/.test(e.message),
    );
    // Shards smaller than the micro-batches.
    const [small] = tokenBatches(1, 2);
    await assert.rejects(() => m.step(small), /fewer than the 2 micro-batches/);
    assert.equal(m.stepCount, 0);
    assert.deepEqual(tensorsOf(await m.saveSafetensors()), before, "nothing changed");
    assert.equal(m.closed, false);
  } finally {
    await m.dispose();
  }
});

Deno.test("dataParallel is checked with the other options", async () => {
  for (const bad of [0, 1.5, -1, "2"]) {
    await assert.rejects(
      () =>
        cpuModel({
          schedule: "1f1b",
          microBatches: 2,
          optimizer: SGD,
          dataParallel: bad as number,
        }),
      (e: Error) => e instanceof RangeError && /dataParallel/.test(e.message),
    );
  }
  await assert.rejects(
    () =>
      cpuModel({ schedule: "1f1b", microBatches: 2, optimizer: SGD, dataParalel: 2 } as Options),
    /unknown option dataParalel: did you mean dataParallel\?/,
  );
  await assert.rejects(
    () =>
      cpuModel({
        schedule: "1f1b",
        microBatches: 2,
        optimizer: SGD,
        dataParallel: 2,
        rankGroup: "subprocess",
      }),
    (e: Error) => e instanceof TypeError && /dataParallel 2 needs rankGroup/.test(e.message),
  );
  assert.equal(liveWorkers(), 0);
});

Deno.test("evaluate and predict across replicas equal the single pipeline's (uneven parts too)", async () => {
  const one = await cpuModel({ schedule: "zb-h1", microBatches: 2, optimizer: SGD });
  const two = await cpuModel({
    schedule: "zb-h1",
    microBatches: 2,
    optimizer: SGD,
    dataParallel: 2,
  });
  try {
    const [b] = tokenBatches(1, 7); // 4 + 3 rows
    const e1 = await one.evaluate(b), e2 = await two.evaluate(b);
    assert.ok(Math.abs(e1.loss - e2.loss) <= 1e-6 * Math.abs(e1.loss), `${e1.loss} vs ${e2.loss}`);
    assert.equal(e2.rows, e1.rows);
    assert.equal(e2.correct, e1.correct);
    const x = { inputs: b.inputs, shape: b.shape };
    const p1 = await one.predict(x), p2 = await two.predict(x);
    assert.deepEqual(p2.shape, p1.shape);
    assert.ok(maxRelative([...p2.data], [...p1.data]) <= 1e-5);
    await assert.rejects(() => two.evaluate(tokenBatches(1, 3)[0]), /fewer than the 4/);
  } finally {
    await one.dispose();
    await two.dispose();
  }
});

Deno.test("replicas that disagree are refused when saving, naming the replica and rank", async () => {
  const bytes = (x: number) => new Uint8Array([1, 2, x]);
  const fake = (files: Uint8Array[]) =>
    ({
      ranks: files.length,
      replicas: 2,
      call: (r: number) => Promise.resolve(files[r]),
    }) as unknown as RankGroup<ModelStageCalls>;
  assert.deepEqual(
    await callReplicasAgreeing(fake([bytes(0), bytes(1), bytes(0), bytes(1)]), "save"),
    [bytes(0), bytes(1)],
  );
  await assert.rejects(
    () => callReplicasAgreeing(fake([bytes(0), bytes(1), bytes(0), bytes(2)]), "saveState"),
    /replica 1's pipeline rank 1 \(rank 3\) holds other training state/,
  );
});

for (const [d, p] of GRID) {
  Deno.test(`workers, (D, P) = (${d}, ${p}): every schedule equals single-device SGD (tiny GPT, rel ${TOL}); replicas identical; every worker ends`, async () => {
    for (const name of SCHEDULE_NAMES) {
      await expectSingleDevice(
        { schedule: name, ranks: p, dataParallel: d, rankGroup: "workers" },
        gptBatches,
        gptRef,
        `workers ${name} at (${d}, ${p})`,
      );
      assert.equal(liveWorkers(), 0, "every worker ended");
    }
  });
}

for (const rankGroup of ["in-process", "workers"] as const) {
  Deno.test(`${rankGroup}, (D, P) = (2, 2): a failing rank ends the step naming replica, rank and action; the model closes`, async () => {
    const fault = rankGroup === "workers"
      ? { at: "1W1", fault: "exit" as const }
      : { failAt: "1W1" };
    const m = await cpuModel(withFaultInjection({
      schedule: "zb-h1",
      microBatches: M,
      optimizer: SGD,
      dataParallel: 2,
      rankGroup,
    }, fault));
    try {
      const error = await m.step(gptBatches[0]).then(() => null, (e) => e);
      assert.ok(error instanceof PipelineRankError, `got ${error}`);
      // Pipeline rank 1 of replica 0 or 1: global rank 1 or 3.
      assert.ok(error.rank === 1 || error.rank === 3, error.message);
      assert.match(error.message, new RegExp(`replica ${(error.rank - 1) / 2}, pipeline rank 1`));
      assert.match(error.message, /1W1/);
      assert.equal(m.closed, true);
    } finally {
      await m.dispose();
    }
    assert.equal(liveWorkers(), 0);
  });
}
