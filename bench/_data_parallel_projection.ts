// The data-parallel bench's predictions: the simulator's step with each
// stage's optimizer step added after its gradients are ready (the
// simulator has no optimizer cost), and the projection of a measured
// pipeline to D replicas on a given link. Used by bench/data_parallel.ts.

import { type ActionCosts, simulate } from "../src/pipeline/analysis/simulate.ts";
import type { SimulationResult } from "../src/pipeline/analysis/simulate.ts";
import type { AllReduceLink } from "../src/pipeline/analysis/all_reduce.ts";
import type { Schedule } from "../src/pipeline/schedule/schedule.ts";

/**
 * The step of `sim` with each stage's optimizer step (`optimizerMs[s]`, in
 * the costs' unit) added: a stage steps once its gradients are ready (its
 * all-reduce's end, or without one its last backward's end, W or B), a
 * rank's optimizer steps one at a time in the order their stages become
 * ready, and the step ends when the last one has. An optimizer step does
 * not delay the rank's later actions here: exact when each rank's last
 * backward is its last action (one stage per rank), a lower bound when a
 * rank holds several stages.
 */
export function stepWithOptimizer(
  schedule: Schedule,
  sim: SimulationResult,
  optimizerMs: readonly number[],
): number {
  const stages = schedule.stageToRank.length;
  if (optimizerMs.length !== stages) {
    throw new RangeError(`optimizerMs has ${optimizerMs.length} entries, want ${stages} (stages)`);
  }
  for (const [s, ms] of optimizerMs.entries()) {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new RangeError(`optimizerMs[${s}] must be a finite number >= 0, got ${ms}`);
    }
  }
  const ready = new Array<number>(stages).fill(0);
  for (const e of sim.events) {
    const k = e.action.kind;
    if ((k === "B" || k === "W") && e.end > ready[e.action.stage]) ready[e.action.stage] = e.end;
  }
  for (const a of sim.allReduce ?? []) ready[a.stage] = Math.max(ready[a.stage], a.end);
  const free = new Array<number>(schedule.ranks).fill(0);
  let end = sim.makespan;
  const order = Array.from({ length: stages }, (_, s) => s).sort((a, b) =>
    ready[a] - ready[b] || a - b
  );
  for (const s of order) {
    const r = schedule.stageToRank[s];
    free[r] = Math.max(free[r], ready[s]) + optimizerMs[s];
    end = Math.max(end, free[r]);
  }
  return end;
}

/** One replica count of {@linkcode projectReplicas}. */
export interface ProjectionRow {
  /** Replicas D. */
  readonly dataParallel: number;
  /** Simulated step in ms, optimizer steps included. */
  readonly stepMs: number;
  /** Of that, the slowest stage's all-reduce in ms (0 at D = 1). */
  readonly allReduceMs: number;
  /** Throughput over D = 1: `D · step(1) / step(D)` (each replica a batch of its own). */
  readonly speedup: number;
}

/**
 * The simulated step of `schedule` (one pipeline's measured per-stage
 * `costs` in ms, each replica on a batch of its own) for each replica
 * count in `replicas`, every stage's gradients (`gradientBytes`) averaged
 * by a ring all-reduce on `link`, with the optimizer steps
 * ({@linkcode stepWithOptimizer}) and `stepOverheadMs` (the step's time
 * outside the actions, default 0), and the implied throughput speed-up over
 * one replica.
 */
export function projectReplicas(
  schedule: Schedule,
  costs: ActionCosts,
  gradientBytes: readonly number[],
  link: AllReduceLink,
  optimizerMs: readonly number[],
  replicas: readonly number[],
  stepOverheadMs = 0,
): ProjectionRow[] {
  if (!Number.isFinite(stepOverheadMs) || stepOverheadMs < 0) {
    throw new RangeError(`stepOverheadMs must be a finite number >= 0, got ${stepOverheadMs}`);
  }
  const step = (d: number) => {
    const sim = simulate(schedule, {
      costs,
      ...(d === 1 ? {} : { dataParallel: d, link, gradientBytes: [...gradientBytes] }),
    });
    const allReduceMs = Math.max(0, ...(sim.allReduce ?? []).map((a) => a.end - a.start));
    return {
      stepMs: stepWithOptimizer(schedule, sim, optimizerMs) + stepOverheadMs,
      allReduceMs,
    };
  };
  const one = step(1).stepMs;
  return replicas.map((d) => {
    const { stepMs, allReduceMs } = step(d);
    return { dataParallel: d, stepMs, allReduceMs, speedup: (d * one) / stepMs };
  });
}
