// One rank of an mpirun job using PipelineParallelModel with rankGroup
// "mpi" directly: batches on rank 0 only (the other ranks pass null), then
// save, load and predict. Each rank compares with single-device training
// (computed here, on the whole batches) and prints `RESULT <json>`.
// Arguments: the schedule name, and optionally a clipGradNorm limit (the
// reference then clips too, and the result carries the pre-clip norms).

import { checkScheduleName } from "../../src/pipeline/schedule/generate.ts";
import { loadSafetensors, saveSafetensors } from "../../src/nn/safetensors.ts";
import { PipelineParallelModel } from "../../src/pipeline/model/pipeline_parallel_model.ts";
import {
  cpu,
  gpt,
  referenceTraining,
  tokenBatches,
} from "../pipeline/model/_reference_training.ts";
import { maxRelative, paramError, tensorsOf } from "../pipeline/model/_compare.ts";

const SGD = { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 } as const;
const schedule = checkScheduleName(Deno.args[0] ?? "1f1b");
const clip = Deno.args[1] === undefined ? undefined : Number(Deno.args[1]);
const batches = tokenBatches(2, 8);
const ref = await referenceTraining(gpt(), SGD, batches, "cross-entropy", clip);
const initial = await saveSafetensors(gpt());
const ranks = Number(Deno.env.get("OMPI_COMM_WORLD_SIZE"));
const net = gpt();
const model = await PipelineParallelModel.create({
  model: net,
  schedule,
  ranks,
  microBatches: 4,
  optimizer: SGD,
  loss: "cross-entropy",
  backend: "cpu",
  rankGroup: "mpi",
  ...(clip === undefined ? {} : { clipGradNorm: clip }),
});
net.dispose();
const rank = model.localRank!;
const mine = (b: typeof batches[0]) => rank === 0 ? b : null;
const first = await model.step(mine(batches[0]));
const second = await model.train([mine(batches[1])]);
const losses = [first.loss, second.steps[0].loss];
const norms = [first.gradNorm, second.steps[0].gradNorm];
const saved = await model.saveSafetensors();
const err = paramError(tensorsOf(saved), ref.tensors);
// Load the initial weights back: the same bytes again on every rank.
await model.loadSafetensors(initial);
const reloaded = await model.saveSafetensors();
// Predict with the trained weights, against the single-device model.
await model.loadSafetensors(ref.bytes);
const single = gpt();
loadSafetensors(single, ref.bytes);
const x = cpu.fromData(batches[0].inputs, batches[0].shape);
const want = await single.forward(x, { save: false }).toArray();
const got = await model.predict({ inputs: batches[0].inputs, shape: batches[0].shape });
const infos = await model.rankInfo();
await model.dispose();
console.log(
  "RESULT " + JSON.stringify({
    rank,
    rankGroup: model.rankGroup,
    lossError: maxRelative(losses, ref.losses),
    normError: clip === undefined ? null : maxRelative(norms as number[], ref.gradNorms),
    refNorms: ref.gradNorms,
    paramWorst: err.worst,
    stepEvents: first.events.length,
    busyRanks: first.busyMs.length,
    reloadedIsInitial: reloaded.length === initial.length &&
      reloaded.every((b, i) => b === initial[i]),
    predictEqual: got.data.length === want.length && got.data.every((v, i) => v === want[i]),
    infoRanks: infos.map((i) => i.rank),
    savedDigest: fnv(saved),
  }),
);

function fnv(bytes: Uint8Array): string {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
  return (h >>> 0).toString(16);
}
