// Data × pipeline parallelism with rankGroup "mpi", without MPI: D·P
// "processes" each create their model over their own InProcessBackend rank
// (global rank k·P + p) and make the same calls concurrently, as D·P copies
// of one script under mpirun would (the real mpirun jobs are in
// tests/cli_mpi_data_parallel_test.ts). Every process must see
// single-device training's losses and weights, and the same bits as the
// in-process group with the same dataParallel.

import assert from "node:assert/strict";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpuModel, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { SPMD_SGD, spmdModels } from "./_spmd_models.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";

const SGD = SPMD_SGD;
const M = 2;
const batches = tokenBatches(2, 8);
const ref = await referenceTraining(gpt(), SGD, batches);

for (const [d, p, schedule] of [[2, 2, "zb-h1"], [2, 1, "1f1b"], [3, 1, "gpipe"]] as const) {
  Deno.test(`SPMD dataParallel ${d} × ${p} ranks (${schedule}): single-device training, in-process bits`, async () => {
    const rows = d * 4;
    const data = rows === 8 ? batches : tokenBatches(2, rows);
    const want = rows === 8 ? ref : await referenceTraining(gpt(), SGD, data);
    const { models, comms } = await spmdModels(d * p, M, { schedule, ranks: p, dataParallel: d });
    try {
      assert.deepEqual(models.map((m) => m.localRank), [...Array(d * p).keys()]);
      assert.ok(models.every((m) => m.dataParallel === d && m.ranks === p));
      // Batches on global rank 0 only: it sends every replica its shard.
      const results = await Promise.all(
        models.map((m, r) => m.train(r === 0 ? data : [null, null])),
      );
      for (const r of results) {
        const err = maxRelative(r.steps.map((s) => s.loss), want.losses);
        assert.ok(err <= 1e-6, `losses off by ${err}`);
        assert.equal(r.steps[0].busyMs.length, d * p, "every global rank's events");
        assert.deepEqual(r.steps.map((s) => s.loss), results[0].steps.map((s) => s.loss));
      }
      const files = await Promise.all(models.map((m) => m.saveSafetensors()));
      for (const f of files) assert.deepEqual(f, files[0], "the same file on every process");
      const err = paramError(tensorsOf(files[0]), want.tensors);
      // f32 sums, shards summed before the average: another order (1.2e-6 measured).
      assert.ok(err.worst <= 1e-5, `${err.worstName} off by ${err.worst}`);
      // The in-process group with the same D and P: the same bits.
      const one = await cpuModel({
        schedule,
        ranks: p,
        microBatches: M,
        optimizer: SGD,
        dataParallel: d,
        rankGroup: "in-process",
      });
      try {
        const r = await one.train(data);
        assert.deepEqual(r.steps.map((s) => s.loss), results[0].steps.map((s) => s.loss));
        assert.deepEqual(await one.saveSafetensors(), files[0], "bit for bit");
      } finally {
        await one.dispose();
      }
    } finally {
      await Promise.all(models.map((m) => m.dispose()));
      for (const c of comms) c.close();
    }
  });
}

Deno.test("SPMD dataParallel: a transport of other than D·P ranks is refused on every process, naming both", async () => {
  const comms = InProcessBackend.createGroup(3);
  const nets = comms.map(() => gpt());
  try {
    const tries = await Promise.allSettled(comms.map((comm, r) =>
      PipelineParallelModel.create({
        model: nets[r],
        schedule: "1f1b",
        ranks: 2,
        microBatches: M,
        optimizer: SGD,
        loss: "cross-entropy",
        backend: "cpu",
        rankGroup: "mpi",
        comm,
        dataParallel: 2,
      })
    ));
    for (const t of tries) {
      assert.equal(t.status, "rejected");
      assert.match(
        String((t as PromiseRejectedResult).reason),
        /RangeError: dataParallel 2 replicas of a 2-rank schedule need 4 ranks but the transport has 3 .*mpirun -n 4/,
      );
    }
  } finally {
    for (const n of nets) n.dispose();
    for (const c of comms) c.close();
  }
});
