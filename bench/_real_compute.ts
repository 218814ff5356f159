// Real-compute pipelines for the benches: the tiny GPT on the CPU backend
// (or WebGPU), a pipeline per schedule in workers, batches from the shipped
// corpus, and the per-action costs measured in a run for the simulator.
// Used by the benches that train the tiny GPT (pipeline_speedup, advise_accuracy, mpi_pipeline, …).

import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { checkScheduleName } from "../src/pipeline/schedule/generate.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { sampleBatch } from "../src/nn/sample_batch.ts";
import { Rng } from "../src/tensor/random.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import type { ActionKind } from "../src/pipeline/schedule/action.ts";
import type { TimedEvent } from "../src/pipeline/schedule/schedule.ts";
import type { ActionCosts } from "../src/pipeline/analysis/simulate.ts";
import {
  PipelineParallelModel,
  type TrainingBatch,
} from "../src/pipeline/model/pipeline_parallel_model.ts";

/** The model and batch of a real-compute run. */
export interface RealComputeConfig {
  readonly dim: number;
  readonly layers: number;
  readonly heads: number;
  readonly batch: number;
  readonly seqLen: number;
  readonly microBatches: number;
  readonly backend: "cpu" | "webgpu";
  readonly seed: number;
  /** How the blocks are layered (see `TinyGPTConfig.split`). */
  readonly split: "blocks" | "halves";
  /** CPU threads per rank (absent: `create`'s default, the cores shared by the ranks). */
  readonly threads?: number;
}

/**
 * Issue 10's model: dim 128, 6 blocks, a 16 × 64 batch in 8 micro-batches,
 * CPU. Each block is two layers (attention half, MLP half), so that ZB-V's
 * and the interleaved schedules' 4 chunks can be balanced (6 whole blocks
 * cannot: 2 + 2 + 1 + 1 put 4 blocks on one rank).
 */
export const REAL_COMPUTE: RealComputeConfig = {
  dim: 128,
  layers: 6,
  heads: 4,
  batch: 16,
  seqLen: 64,
  microBatches: 8,
  backend: "cpu",
  seed: 1,
  split: "halves",
};

const tokenizer = CharTokenizer.fromText(TINY_CORPUS);
const tokens = tokenizer.encode(TINY_CORPUS);

/** The tiny GPT of `cfg` as a pipeline of `ranks` ranks (in workers unless `rankGroup` says). */
export async function createRealPipeline(
  cfg: RealComputeConfig,
  schedule: string,
  ranks: number,
  rankGroup: "workers" | "in-process" | "subprocess" = "workers",
  clipGradNorm?: number,
): Promise<PipelineParallelModel> {
  const cpu = new CpuBackend();
  const net = createTinyGPT({
    vocabSize: tokenizer.vocabSize,
    seqLen: cfg.seqLen,
    dim: cfg.dim,
    heads: cfg.heads,
    layers: cfg.layers,
    seed: cfg.seed,
    split: cfg.split,
  }, cpu);
  try {
    return await PipelineParallelModel.create({
      model: net,
      schedule: checkScheduleName(schedule),
      ranks,
      microBatches: cfg.microBatches,
      optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
      loss: "cross-entropy",
      backend: cfg.backend,
      ...(cfg.threads === undefined ? {} : { threads: cfg.threads }),
      rankGroup,
      ...(clipGradNorm === undefined ? {} : { clipGradNorm }),
    });
  } finally {
    net.dispose();
  }
}

/** `count` batches of `cfg`, the same for every schedule with the same `seed`. */
export function realBatches(cfg: RealComputeConfig, count: number, seed: number): TrainingBatch[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => {
    const b = sampleBatch(tokens, cfg.batch, cfg.seqLen, rng);
    return { inputs: b.ids, shape: b.shape, targets: b.targets };
  });
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/**
 * Per-action costs as the simulator takes them: for each action kind, the
 * median duration per global stage over `events` (a kind that did not run
 * is left out, so the simulator's default rule applies to it).
 */
export function measuredCosts(events: readonly TimedEvent[], numStages: number): ActionCosts {
  const out: Partial<Record<ActionKind, number[]>> = {};
  for (const kind of ["F", "B", "I", "W"] as const) {
    const per = Array.from({ length: numStages }, (_, s) =>
      median(
        events.filter((e) => e.action.kind === kind && e.action.stage === s)
          .map((e) => e.end - e.start),
      ));
    if (per.every(Number.isFinite)) out[kind] = per;
  }
  return out;
}
