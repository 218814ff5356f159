// One rank of `bench/mpi_pipeline.ts` and `bench/data_parallel.ts`: under
// `mpirun -n D·P`, trains the real-compute tiny GPT (bench/_real_compute.ts)
// with one schedule as one rank of a PipelineParallelModel with rankGroup
// "mpi" (D replicas of a P-rank pipeline; D = 1 unless `dataParallel=D` is
// given), measures the link between ranks 0 and 1 first (D·P >= 2), and
// rank 0 prints one `ROW <json>` line. Arguments: schedule, warm-up steps,
// measured steps, then `key=value` overrides of the real-compute config
// (dim, layers, split, ...) and `dataParallel=D`.

import { MpiBackend } from "../src/pipeline/comm/mpi_backend.ts";
import { checkScheduleName } from "../src/pipeline/schedule/generate.ts";
import { measureLink } from "../src/pipeline/comm/link_model.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import type { TimedEvent } from "../src/pipeline/schedule/schedule.ts";
import {
  measuredCosts,
  REAL_COMPUTE,
  realBatches,
  type RealComputeConfig,
} from "./_real_compute.ts";

const [schedule, warmupText, stepsText, ...overrides] = Deno.args;
const cfg: RealComputeConfig = { ...REAL_COMPUTE };
let d = 1, grid = false, shardOptimizer = false;
for (const o of overrides) {
  const [k, v] = o.split("=");
  if (k === "dataParallel") [d, grid] = [Number(v), true];
  else if (k === "shardOptimizer") shardOptimizer = v === "1";
  else {(cfg as unknown as Record<string, unknown>)[k] = k === "backend" || k === "split"
      ? v
      : Number(v);}
}
const warmup = Number(warmupText);
const steps = Number(stepsText);

const comm = await MpiBackend.init();
const p = comm.size / d;
if (!Number.isInteger(d) || d < 1 || !Number.isInteger(p)) {
  throw new RangeError(
    `dataParallel=${d} must be a positive integer dividing the ${comm.size} processes`,
  );
}
const link = comm.size >= 2 && comm.rank <= 1 ? await measureLink(comm, 1 - comm.rank) : null;
const tok = CharTokenizer.fromText(TINY_CORPUS);
const net = createTinyGPT({
  vocabSize: tok.vocabSize,
  seqLen: cfg.seqLen,
  dim: cfg.dim,
  heads: cfg.heads,
  layers: cfg.layers,
  seed: cfg.seed,
  split: cfg.split,
}, new CpuBackend());
// Bytes of each stage's gradients (f32), for the simulator's all-reduce.
const gradientBytes = (b: readonly number[]) =>
  b.slice(0, -1).map((from, s) =>
    net.layers.slice(from, b[s + 1]).flatMap((l) => l.parameters())
      .reduce((n, q) => n + 4 * q.value.size, 0)
  );
const model = await PipelineParallelModel.create({
  model: net,
  schedule: checkScheduleName(schedule),
  ranks: p,
  dataParallel: d,
  shardOptimizer,
  microBatches: cfg.microBatches,
  optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
  loss: "cross-entropy",
  backend: cfg.backend,
  rankGroup: "mpi",
  comm,
});
const stageBytes = gradientBytes(model.partition.boundaries);
net.dispose();
if (warmup > 0) await model.train(realBatches(cfg, warmup, 100));
// bench/data_parallel.ts (grid): each step timed from its call to its end,
// as it times workers, and every timed step's events for the simulator's
// costs (each kind's median per stage). bench/mpi_pipeline.ts: the steady-state period of one train call.
const row = grid ? await timedSteps() : await trainedPeriod();
if (comm.rank === 0) console.log("ROW " + JSON.stringify({ schedule, ranks: p, link, ...row }));
await model.dispose();
comm.close();

async function timedSteps(): Promise<Record<string, unknown>> {
  const stepTimesMs: number[] = [];
  const events: TimedEvent[] = [];
  for (const b of realBatches(cfg, steps, 7)) {
    const t = performance.now();
    await model.step(b);
    stepTimesMs.push(performance.now() - t);
    events.push(...model.lastEvents);
  }
  return {
    dataParallel: d,
    stepTimesMs,
    costs: measuredCosts(events, model.schedule.stageToRank.length),
    gradientBytes: stageBytes,
  };
}

async function trainedPeriod(): Promise<Record<string, unknown>> {
  const r = await model.train(realBatches(cfg, steps, 200));
  const summary = summarizeTimeline(r.events, comm.size, { steadyFrom: 1 });
  return {
    stepMs: summary.period,
    bubbleMeasured: summary.steadyStateBubble,
    costs: measuredCosts(r.events, model.schedule.stageToRank.length),
    stageCosts: model.partition.stageCosts,
    // Time per step outside the actions (optimizer steps, hand-overs), per rank.
    busyPerStepMs: summary.busy.map((b) => b / steps),
    activationBytes: (cfg.batch / cfg.microBatches) * cfg.seqLen * cfg.dim * 4,
  };
}
