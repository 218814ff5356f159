// Global-norm clipping without a barrier (post-validation): the pipeline's
// parameters, losses and reported pre-clip norms equal single-device
// training with clipGradNorm, whether every step clips or only some, for
// every schedule, with the non-finite check on or off, in every rank group
// (this thread, workers, a subprocess, and "mpi" over in-process ranks). Tolerances as pipeline_parallel_model_test.ts.

import assert from "node:assert/strict";
import { SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import { cpuModel, gpt, referenceTraining, tokenBatches } from "./_reference_training.ts";
import { maxRelative, paramError, tensorsOf } from "./_compare.ts";

const STRICT = 1e-5;
const LOSS_TOL = 1e-6;
const NORM_TOL = 1e-6;
const M = 8;
const SGD_SPEC: OptimizerSpec = { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 };
const batches = tokenBatches(4, 10);
// Every step clips at 0.5 (checked below).
const CLIP = 0.5;
const refSgd = await referenceTraining(gpt(), SGD_SPEC, batches, "cross-entropy", CLIP);

async function trainAndCompare(
  options: Partial<PipelineParallelModelOptions>,
  ref: Awaited<ReturnType<typeof referenceTraining>>,
  label: string,
): Promise<void> {
  const m: PipelineParallelModel = await cpuModel({
    microBatches: M,
    optimizer: SGD_SPEC,
    ...options,
  });
  try {
    const r = await m.train(batches);
    const norms = r.steps.map((s) => s.gradNorm!);
    assert.ok(
      maxRelative(norms, ref.gradNorms) <= NORM_TOL,
      `${label}: norms ${norms} vs ${ref.gradNorms}`,
    );
    const err = paramError(tensorsOf(await m.saveSafetensors()), ref.tensors);
    assert.ok(err.worst <= STRICT, `${label}: ${err.worstName} off by ${err.worst} relative`);
    const lossErr = maxRelative(r.steps.map((s) => s.loss), ref.losses);
    assert.ok(lossErr <= LOSS_TOL, `${label}: losses off by ${lossErr}`);
    assert.ok(r.steps.every((s) => s.skipped === undefined), `${label}: a clip is no skipped step`);
    for (const info of await m.rankInfo()) {
      assert.deepEqual(
        info.heldKeys,
        [],
        `${label}: rank ${info.rank} holds no state after a step`,
      );
    }
  } finally {
    await m.dispose();
  }
  assert.equal(liveWorkers(), 0, `${label}: every worker ended`);
}

Deno.test("clipping in-process, P = 2: every step clipped equals single-device clipGradNorm, for every schedule", async () => {
  assert.ok(refSgd.gradNorms.every((n) => n > CLIP), `clipping is active: ${refSgd.gradNorms}`);
  for (const name of SCHEDULE_NAMES) {
    await trainAndCompare({ schedule: name, ranks: 2, clipGradNorm: CLIP }, refSgd, name);
  }
});

Deno.test('clipping with nonFinite: "off" equals single-device clipGradNorm (zb-h2, zb-v, interleaved-1f1b)', async () => {
  for (const name of ["zb-h2", "zb-v", "interleaved-1f1b"] as const) {
    await trainAndCompare(
      { schedule: name, ranks: 2, clipGradNorm: CLIP, nonFinite: "off" },
      refSgd,
      `${name} nonFinite off`,
    );
  }
});

Deno.test("clipping in workers equals single-device clipGradNorm (zb-h2, interleaved-1f1b; the check on and off)", async () => {
  await trainAndCompare(
    { schedule: "zb-h2", ranks: 2, clipGradNorm: CLIP, rankGroup: "workers" },
    refSgd,
    "zb-h2 workers",
  );
  await trainAndCompare(
    {
      schedule: "interleaved-1f1b",
      ranks: 2,
      clipGradNorm: CLIP,
      rankGroup: "workers",
      nonFinite: "off",
    },
    refSgd,
    "interleaved-1f1b workers, nonFinite off",
  );
});

Deno.test("clipping only some steps (P = 4, zb-v): clipped and committed steps both equal single-device training", async () => {
  const free = await referenceTraining(gpt(), SGD_SPEC, batches, "cross-entropy", 1e9);
  const sorted = [...free.gradNorms].sort((a, b) => a - b);
  // Between the 2nd and 3rd norm: about half the steps clip.
  const clip = (sorted[1] + sorted[2]) / 2;
  const ref = await referenceTraining(gpt(), SGD_SPEC, batches, "cross-entropy", clip);
  const clipped = ref.gradNorms.map((n) => n > clip);
  assert.ok(
    clipped.includes(true) && clipped.includes(false),
    `mixed: ${ref.gradNorms} at ${clip}`,
  );
  await trainAndCompare({ schedule: "zb-v", ranks: 4, clipGradNorm: clip }, ref, "zb-v P=4 mixed");
});

Deno.test("clipping in a subprocess rank group equals single-device clipGradNorm (zb-v)", async () => {
  await trainAndCompare(
    { schedule: "zb-v", ranks: 2, clipGradNorm: CLIP, rankGroup: "subprocess" },
    refSgd,
    "zb-v subprocess",
  );
});

Deno.test('clipping with rankGroup "mpi" (P processes simulated in-process): every rank reports the single-device norms and parameters', async () => {
  const comms = InProcessBackend.createGroup(2);
  const nets = comms.map(() => gpt());
  let models: PipelineParallelModel[] = [];
  try {
    models = await Promise.all(comms.map((comm, r) =>
      PipelineParallelModel.create({
        model: nets[r],
        schedule: "zb-h2",
        ranks: 2,
        microBatches: M,
        optimizer: SGD_SPEC,
        loss: "cross-entropy",
        backend: "cpu",
        rankGroup: "mpi",
        comm,
        clipGradNorm: CLIP,
      })
    ));
    const results = await Promise.all(models.map((m) => m.train(batches)));
    for (const r of results) {
      const norms = r.steps.map((s) => s.gradNorm!);
      assert.ok(maxRelative(norms, refSgd.gradNorms) <= NORM_TOL, `norms ${norms}`);
      assert.ok(maxRelative(r.steps.map((s) => s.loss), refSgd.losses) <= LOSS_TOL);
    }
    const files = await Promise.all(models.map((m) => m.saveSafetensors()));
    assert.deepEqual(files[1], files[0], "the same file on every rank");
    const err = paramError(tensorsOf(files[0]), refSgd.tensors);
    assert.ok(err.worst <= STRICT, `${err.worstName} off by ${err.worst}`);
  } finally {
    for (const n of nets) n.dispose();
    await Promise.all(models.map((m) => m.dispose()));
    for (const c of comms) c.close();
  }
});
