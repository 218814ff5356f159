// One rank of `bench/mpi_pipeline.ts`: under `mpirun -n P`, trains the
// real-compute tiny GPT (bench/_real_compute.ts) with one schedule as one
// rank of a PipelineParallelModel with rankGroup "mpi", measures the link
// between ranks 0 and 1 first (P >= 2), and rank 0 prints one `ROW <json>`
// line. Arguments: schedule, warm-up steps, measured steps, then
// `key=value` overrides of the real-compute config (dim, layers, ...).

import { MpiBackend } from "../src/pipeline/comm/mpi_backend.ts";
import { checkScheduleName } from "../src/pipeline/schedule/generate.ts";
import { measureLink } from "../src/pipeline/comm/link_model.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import {
  measuredCosts,
  REAL_COMPUTE,
  realBatches,
  type RealComputeConfig,
} from "./_real_compute.ts";

const [schedule, warmupText, stepsText, ...overrides] = Deno.args;
const cfg: RealComputeConfig = { ...REAL_COMPUTE };
for (const o of overrides) {
  const [k, v] = o.split("=");
  (cfg as unknown as Record<string, unknown>)[k] = k === "backend" ? v : Number(v);
}
const warmup = Number(warmupText);
const steps = Number(stepsText);

const comm = await MpiBackend.init();
const p = comm.size;
const link = p >= 2 && comm.rank <= 1 ? await measureLink(comm, 1 - comm.rank) : null;
const tok = CharTokenizer.fromText(TINY_CORPUS);
const net = createTinyGPT({
  vocabSize: tok.vocabSize,
  seqLen: cfg.seqLen,
  dim: cfg.dim,
  heads: cfg.heads,
  layers: cfg.layers,
  seed: cfg.seed,
}, new CpuBackend());
const model = await PipelineParallelModel.create({
  model: net,
  schedule: checkScheduleName(schedule),
  ranks: p,
  microBatches: cfg.microBatches,
  optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
  loss: "cross-entropy",
  backend: cfg.backend,
  rankGroup: "mpi",
  comm,
});
net.dispose();
if (warmup > 0) await model.train(realBatches(cfg, warmup, 100));
const r = await model.train(realBatches(cfg, steps, 200));
const summary = summarizeTimeline(r.events, p, { steadyFrom: 1 });
// Time per step outside the actions (optimizer steps, hand-overs), per rank.
const busy = summary.busy.map((b) => b / steps);
if (comm.rank === 0) {
  console.log(
    "ROW " + JSON.stringify({
      schedule,
      ranks: p,
      stepMs: summary.period,
      bubbleMeasured: summary.steadyStateBubble,
      costs: measuredCosts(r.events, model.schedule.stageToRank.length),
      stageCosts: model.partition.stageCosts,
      busyPerStepMs: busy,
      link,
      activationBytes: (cfg.batch / cfg.microBatches) * cfg.seqLen * cfg.dim * 4,
    }),
  );
}
await model.dispose();
comm.close();
