// The advisor's check of a prediction: the candidate trained for real
// (PipelineParallelModel in workers, its schedule and partition as
// predicted), warm-up steps first, then steps back to back in one train
// call. Not exported from the package.

import type { NonFinitePolicy } from "../pipeline/runtime/run_policy.ts";
import type { Sequential } from "../nn/sequential.ts";
import type { OptimizerSpec } from "../nn/optimizer_spec.ts";
import type { BackendKind } from "../tensor/create_backend.ts";
import type { Schedule, TimedEvent } from "../pipeline/schedule/schedule.ts";
import { FixedPartition } from "../pipeline/partition/partition.ts";
import { summarizeTimeline } from "../pipeline/analysis/timeline_summary.ts";
import { PipelineParallelModel } from "../pipeline/model/pipeline_parallel_model.ts";
import type { TrainingBatch } from "../pipeline/model/batch.ts";
import type { PipelineLoss } from "../pipeline/model/model_rank_executor.ts";

/** What a verification measured. */
export interface Measured {
  /** Median period between consecutive steps' ends from the second measured step on, ms. */
  readonly stepMs: number;
  /** Steady-state bubble over the same periods. */
  readonly bubble: number;
  /** Each period between consecutive measured steps' ends, in step order, ms. */
  readonly periodsMs: readonly number[];
  /** Per rank: the largest peak activation bytes any step (warm-up included) reported. */
  readonly activationBytes: readonly number[];
  /** The measured steps' action spans. */
  readonly events: readonly TimedEvent[];
}

/** Trains `schedule` cut at `boundaries` on `sample` and measures it. */
export async function measureCandidate(
  model: Sequential,
  sample: TrainingBatch,
  schedule: Schedule,
  boundaries: readonly number[],
  o: {
    readonly loss: PipelineLoss;
    readonly optimizer: OptimizerSpec;
    readonly backend: BackendKind;
    readonly modules: readonly string[];
    readonly nonFinite: NonFinitePolicy;
    readonly warmup: number;
    readonly steps: number;
  },
): Promise<Measured> {
  const pipe = await PipelineParallelModel.create({
    model,
    schedule,
    partition: new FixedPartition(boundaries),
    optimizer: o.optimizer,
    loss: o.loss,
    backend: o.backend,
    rankGroup: "workers",
    modules: o.modules,
    nonFinite: o.nonFinite,
  });
  try {
    const warm = o.warmup > 0
      ? (await pipe.train(new Array<TrainingBatch>(o.warmup).fill(sample))).steps
      : [];
    const r = await pipe.train(new Array<TrainingBatch>(o.steps).fill(sample));
    const all = [...warm, ...r.steps];
    const sum = summarizeTimeline(r.events, schedule.ranks, { steadyFrom: 1 });
    const ends = r.steps.map((s) => Math.max(...s.events.map((e) => e.end)));
    return {
      stepMs: sum.period ?? r.makespanMs,
      bubble: sum.steadyStateBubble ?? r.bubble,
      periodsMs: ends.slice(1).map((end, k) => end - ends[k]),
      activationBytes: Array.from(
        { length: schedule.ranks },
        (_, rank) => Math.max(...all.map((s) => s.peakActivationBytes[rank] ?? 0)),
      ),
      events: r.events,
    };
  } finally {
    await pipe.dispose();
  }
}
