// One process of an mpirun job of D·P processes using PipelineParallelModel
// with rankGroup "mpi" and dataParallel D directly: batches on rank 0 only
// (the other processes pass null), two steps, then save. Every process
// prints `RESULT <json>` with its losses and the digest of the saved file;
// rank 0 also compares them with single-device training (on the whole
// batches) and with the in-process group of the same D and P (bit for bit).
// Arguments: D, P and the schedule name.

import { checkScheduleName } from "../../src/pipeline/schedule/generate.ts";
import { PipelineParallelModel } from "../../src/pipeline/model/pipeline_parallel_model.ts";
import {
  cpuModel,
  gpt,
  referenceTraining,
  tokenBatches,
} from "../pipeline/model/_reference_training.ts";
import { maxRelative, paramError, tensorsOf } from "../pipeline/model/_compare.ts";

const SGD = { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 } as const;
const d = Number(Deno.args[0]);
const p = Number(Deno.args[1]);
const schedule = checkScheduleName(Deno.args[2] ?? "1f1b");
const batches = tokenBatches(2, 4 * d);
const net = gpt();
const model = await PipelineParallelModel.create({
  model: net,
  schedule,
  ranks: p,
  dataParallel: d,
  microBatches: 2,
  optimizer: SGD,
  loss: "cross-entropy",
  backend: "cpu",
  rankGroup: "mpi",
});
net.dispose();
const rank = model.localRank!;
const run = await model.train(rank === 0 ? batches : [null, null]);
const losses = run.steps.map((s) => s.loss);
const saved = await model.saveSafetensors();
const busyRanks = run.steps[0].busyMs.length;
await model.dispose();
let checks = {};
if (rank === 0) {
  const ref = await referenceTraining(gpt(), SGD, batches);
  const one = await cpuModel({
    schedule,
    ranks: p,
    dataParallel: d,
    microBatches: 2,
    optimizer: SGD,
  });
  const inProcess = (await one.train(batches)).steps.map((s) => s.loss);
  const inProcessFile = await one.saveSafetensors();
  await one.dispose();
  checks = {
    lossError: maxRelative(losses, ref.losses),
    paramWorst: paramError(tensorsOf(saved), ref.tensors).worst,
    lossesEqualInProcess: losses.every((l, i) => l === inProcess[i]),
    fileEqualsInProcess: saved.length === inProcessFile.length &&
      saved.every((b, i) => b === inProcessFile[i]),
  };
}
console.log(
  "RESULT " + JSON.stringify({ rank, losses, busyRanks, savedDigest: fnv(saved), ...checks }),
);

function fnv(bytes: Uint8Array): string {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
  return (h >>> 0).toString(16);
}
