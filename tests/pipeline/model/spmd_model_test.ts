// PipelineParallelModel with rankGroup "mpi", without MPI: P "processes"
// each create their model over their own InProcessBackend rank and make
// the same calls concurrently, as P copies of one script under mpirun would
// (the real mpirun jobs are in tests/cli_mpi_test.ts). Every rank must see
// single-device training's losses and parameters.

import assert from "node:assert/strict";
import { loadSafetensors, saveSafetensors } from "../../../src/nn/safetensors.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpu, GPT, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import { threadsPerRank } from "../../../src/tensor/cpu/backend_options.ts";
import { SPMD_SGD, spmdModels } from "./_spmd_models.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";

const SGD = SPMD_SGD;
const M = 4;
const batches = tokenBatches(2, 6);
const ref = await referenceTraining(gpt(), SGD, batches);

async function disposeAll(models: PipelineParallelModel[], comms: InProcessBackend[]) {
  await Promise.all(models.map((m) => m.dispose()));
  for (const c of comms) c.close();
}

for (const name of ["zb-h1", "interleaved-1f1b"] as const) {
  Deno.test(`SPMD ${name}, P = 2: every rank's steps give single-device losses and parameters`, async () => {
    const { models, comms } = await spmdModels(2, M, { schedule: name });
    try {
      assert.deepEqual(models.map((m) => [m.rankGroup, m.localRank]), [["mpi", 0], ["mpi", 1]]);
      const results = await Promise.all(models.map((m) => m.train(batches)));
      for (const r of results) {
        assert.ok(maxRelative(r.steps.map((s) => s.loss), ref.losses) <= 1e-6);
        assert.equal(r.steps[0].busyMs.length, 2, "both ranks' events on every rank");
      }
      assert.deepEqual(results[1].steps.map((s) => s.loss), results[0].steps.map((s) => s.loss));
      const files = await Promise.all(models.map((m) => m.saveSafetensors()));
      assert.deepEqual(files[1], files[0], "the same file on every rank");
      const err = paramError(tensorsOf(files[0]), ref.tensors);
      assert.ok(err.worst <= 1e-5, `${err.worstName} off by ${err.worst}`);
      const infos = await Promise.all(models.map((m) => m.rankInfo()));
      for (const info of infos) {
        assert.deepEqual(info.map((i) => i.rank), [0, 1]);
        // Two ranks share the cores: each rank's CPU backend gets half of them.
        const rankCpu = new CpuBackend({ threads: threadsPerRank(2) });
        assert.deepEqual(info.map((i) => i.device), [rankCpu.description, rankCpu.description]);
        rankCpu.close();
        assert.ok(info.every((i) => i.heldKeys.length === 0));
      }
    } finally {
      await disposeAll(models, comms);
    }
  });
}

Deno.test("SPMD, P = 3: batches on rank 0 only equal batches everywhere; null is refused elsewhere", async () => {
  const { models, comms } = await spmdModels(3, M, { schedule: "gpipe" });
  try {
    const losses = await Promise.all(models.map(async (m, r) => {
      const first = await m.step(r === 0 ? batches[0] : null);
      const second = await m.train([r === 0 ? batches[1] : null]);
      return [first.loss, second.steps[0].loss];
    }));
    for (const l of losses) assert.ok(maxRelative(l, ref.losses) <= 1e-6, String(l));
    const files = await Promise.all(models.map((m) => m.saveSafetensors()));
    const err = paramError(tensorsOf(files[2]), ref.tensors);
    assert.ok(err.worst <= 1e-5, `${err.worstName} off by ${err.worst}`);
    // Rank 0 must have the batch; a mix is refused (before any message is sent).
    await assert.rejects(models[0].step(null), /rank 0 has no batch/);
    await assert.rejects(models[1].train([batches[0], null]), /holds 1 null of 2/);
  } finally {
    await disposeAll(models, comms);
  }
  const single = await PipelineParallelModel.create({
    model: gpt(),
    schedule: "1f1b",
    ranks: 1,
    microBatches: 1,
    optimizer: SGD,
    loss: "cross-entropy",
    backend: "cpu",
    rankGroup: "in-process",
  });
  await assert.rejects(single.step(null), /a null batch, sent by rank 0, needs rankGroup "mpi"/);
  await single.dispose();
});

Deno.test("SPMD, P = 2: save, load and predict give the single-device bytes and outputs on every rank", async () => {
  const { models, comms } = await spmdModels(2, M, { schedule: "zb-v" });
  const single = gpt();
  try {
    const initial = await saveSafetensors(single);
    for (const f of await Promise.all(models.map((m) => m.saveSafetensors()))) {
      assert.deepEqual(f, initial);
    }
    await Promise.all(models.map((m) => m.loadSafetensors(ref.bytes)));
    for (const f of await Promise.all(models.map((m) => m.saveSafetensors()))) {
      assert.deepEqual(f, ref.bytes);
    }
    loadSafetensors(single, ref.bytes);
    // A batch of at least m rows runs as a pipeline; a smaller one stage by stage.
    for (const b of [batches[1], tokenBatches(1, 3, 5)[0]]) {
      const x = cpu.fromData(b.inputs, b.shape);
      const y = single.forward(x, { save: false });
      const want = await y.toArray();
      const got = await Promise.all(
        models.map((m) => m.predict({ inputs: b.inputs, shape: b.shape })),
      );
      for (const g of got) {
        assert.deepEqual(g.shape, y.shape);
        assert.deepEqual(g.data, want, `${b.shape[0]} rows`);
      }
      x.dispose();
      y.dispose();
    }
    const stats = await Promise.all(models.map((m) => m.parameterStats()));
    assert.deepEqual(stats[1], stats[0]);
  } finally {
    single.dispose();
    await disposeAll(models, comms);
  }
});

Deno.test("SPMD: a rank count other than the transport's, or a different model, is refused", async () => {
  const comms = InProcessBackend.createGroup(2);
  const net = gpt();
  const base = {
    model: net,
    schedule: "1f1b",
    microBatches: M,
    optimizer: SGD,
    loss: "cross-entropy",
    backend: "cpu",
    rankGroup: "mpi",
  } as const;
  try {
    await assert.rejects(
      PipelineParallelModel.create({ ...base, ranks: 4, comm: comms[0] }),
      /the schedule has 4 ranks but the transport has 2/,
    );
    const errs = await Promise.allSettled(comms.map((comm) =>
      PipelineParallelModel.create({
        ...base,
        ranks: 2,
        comm,
        optimizer: comm.rank === 1 ? { kind: "sgd", lr: 0.5 } : SGD,
      })
    ));
    for (const e of errs) {
      assert.equal(e.status, "rejected");
      assert.match(
        String((e as PromiseRejectedResult).reason),
        /rank\(s\) 1 planned a different pipeline/,
      );
    }
    await assert.rejects(
      PipelineParallelModel.create({ ...base, ranks: 2, rankGroup: "workers", comm: comms[0] }),
      /comm is the transport of rankGroup "mpi", but rankGroup is "workers"/,
    );
    await assert.rejects(
      // The older flag beside rankGroup is gone: refused as an unknown option.
      PipelineParallelModel.create({ ...base, ranks: 2, workers: true } as never),
      /unknown option workers/,
    );
    await assert.rejects(
      PipelineParallelModel.create({ ...base, ranks: 2, rankGroup: "threads" as "mpi" }),
      /rankGroup must be one of workers, subprocess, in-process, mpi, got "threads"/,
    );
  } finally {
    net.dispose();
    for (const c of comms) c.close();
  }
});

Deno.test("SPMD: a process whose initial weights, optimizer or own settings differ from rank 0's is refused, naming them", async () => {
  const cases: {
    what: string;
    options: (rank: number) => Partial<PipelineParallelModelOptions>;
    seed?: (rank: number) => number;
    want: RegExp;
  }[] = [
    {
      what: "weights (another seed)",
      options: () => ({}),
      seed: (r) => 7 + r,
      want:
        /^RangeError: rank\(s\) 1 planned a different pipeline than rank 0: rank 1's weights: \d+ bytes, digest \w+ \(rank 0's: \d+ bytes, digest \w+\): every process must run the same script/,
    },
    {
      what: "a setting of the script",
      options: (r) => ({ sameOnEveryRank: { seed: 3, batch: 8 + r } }),
      want: /: rank 1's batch: 9 \(rank 0's: 8\): every process/,
    },
    {
      what: "the learning-rate schedule",
      options: (r) => ({
        optimizer: r === 0
          ? SGD
          : { ...SGD, lrSchedule: { kind: "step", stepSize: 2, gamma: 0.5 } },
      }),
      want: /: rank 1's optimizer: digest \w+ \(rank 0's: digest \w+\): every process/,
    },
  ];
  for (const k of cases) {
    const comms = InProcessBackend.createGroup(2);
    const nets = comms.map((_, r) =>
      k.seed === undefined ? gpt() : gpt({ ...GPT, seed: k.seed(r) })
    );
    try {
      const errs: PromiseSettledResult<PipelineParallelModel>[] = await Promise.allSettled(
        comms.map((comm, r): Promise<PipelineParallelModel> =>
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
            ...k.options(r),
          })
        ),
      );
      for (const e of errs) {
        assert.equal(e.status, "rejected", k.what);
        assert.match(String((e as PromiseRejectedResult).reason), k.want, k.what);
      }
    } finally {
      for (const n of nets) n.dispose();
      for (const comm of comms) comm.close();
    }
  }
});
