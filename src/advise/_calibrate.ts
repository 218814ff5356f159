// The advisor's calibration: one short real pipeline per kind of schedule
// among the candidates (1F1B where any runs full backwards, ZB-H1 where
// any splits I and W), trained in workers with the model's own executor
// and the partition the profile predicts for it, whose action spans give
// each kind's ratio of measured to profiled time and the runtime's costs
// (fitCalibration). Not exported from the package.

import type { Sequential } from "../nn/sequential.ts";
import type { OptimizerSpec } from "../nn/optimizer_spec.ts";
import type { BackendKind } from "../tensor/create_backend.ts";
import type { NonFinitePolicy } from "../pipeline/runtime/run_policy.ts";
import type { PassProfile } from "../pipeline/partition/layer_passes.ts";
import { generateSchedule, type ScheduleName } from "../pipeline/schedule/generate.ts";
import {
  planCandidate,
  type PlannedCandidate,
  predictStep,
  type RuntimeOverheads,
  stageCosts,
  type TogetherTimes,
} from "./step_prediction.ts";
import {
  type AdviceCalibration,
  type CalibrationCheck,
  type CalibrationRun,
  fitCalibration,
  fitStepOverhead,
} from "./calibration.ts";
import type { TrainingBatch } from "../pipeline/model/batch.ts";
import type { PipelineLoss } from "../pipeline/model/model_rank_executor.ts";
import { measureCandidate } from "./_verify.ts";

/** The step time of a plan, with contention where it carries together costs. */
export function predictPlan(plan: PlannedCandidate, overheads: RuntimeOverheads): number {
  const t = plan.together;
  return predictStep(plan.schedule, plan.costs, overheads, t ? { together: t } : {}).stepMs;
}

/** A candidate planned with the calibrated costs (cut and costed with the factors). */
export function planCalibrated(
  name: ScheduleName,
  ranks: number,
  microBatches: number,
  profile: PassProfile,
  cal: AdviceCalibration,
): PlannedCandidate {
  const lossMs = profile.loss?.median ?? 0;
  return planCandidate(
    name,
    ranks,
    microBatches,
    profile.layers,
    cal.overheads,
    lossMs,
    undefined,
    cal.factors,
  );
}

/** What a calibration run needs besides the profile. */
export interface CalibrateOptions {
  readonly loss: PipelineLoss;
  readonly optimizer: OptimizerSpec;
  readonly backend: BackendKind;
  readonly modules: readonly string[];
  readonly nonFinite: NonFinitePolicy;
  readonly warmup: number;
  readonly steps: number;
}

/** The schedules to run: 1F1B where a candidate runs B, ZB-H1 where one runs I and W. */
export function calibrationRuns(
  schedules: readonly ScheduleName[],
  ranks: number,
  microBatches: number,
): ScheduleName[] {
  let full = false;
  let split = false;
  for (const name of schedules) {
    if (name === "zb-auto") {
      split = true;
      continue;
    }
    try {
      const s = generateSchedule(name, { ranks, microBatches });
      for (const list of s.actions) {
        for (const a of list) {
          if (a.kind === "B") full = true;
          else if (a.kind === "I" || a.kind === "W") split = true;
        }
      }
    } catch (e) {
      if (!(e instanceof RangeError || e instanceof TypeError)) throw e;
    }
  }
  const out: ScheduleName[] = [];
  if (full) out.push("1f1b");
  if (split) out.push("zb-h1");
  return out;
}

// (longest − shortest) / median of a run's periods between steps.
function spreadOf(r: { periodsMs: readonly number[]; stepMs: number }): number {
  const p = r.periodsMs;
  if (p.length < 2 || !(r.stepMs > 0)) return 0;
  return (Math.max(...p) - Math.min(...p)) / r.stepMs;
}

/**
 * Runs each of `names` for real at `ranks` × `microBatches` (cut as the
 * profile predicts) and fits the calibration; null when none can be
 * planned (fewer layers than ranks, say).
 */
export async function calibrate(
  model: Sequential,
  sample: TrainingBatch,
  names: readonly ScheduleName[],
  at: {
    readonly ranks: number;
    readonly microBatches: number;
    readonly profile: PassProfile;
    readonly overheads: RuntimeOverheads;
    readonly together: TogetherTimes | undefined;
  },
  o: CalibrateOptions,
  progress: (message: string) => void,
): Promise<AdviceCalibration | null> {
  const { ranks, microBatches, profile, overheads, together } = at;
  const t0 = performance.now();
  const lossMs = profile.loss?.median ?? 0;
  const runs: CalibrationRun[] = [];
  const measured: {
    name: string;
    boundaries: number[];
    ms: number;
    uncalibrated: number;
    spread: number;
  }[] = [];
  for (const name of names) {
    let plan;
    try {
      plan = planCandidate(name, ranks, microBatches, profile.layers, overheads, lossMs, together);
    } catch (e) {
      if (!(e instanceof RangeError || e instanceof TypeError)) throw e;
      continue;
    }
    const b = plan.partition.boundaries;
    progress(`calibrating on ${name} at ${ranks} ranks, ${microBatches} micro-batches, for real`);
    const r = await measureCandidate(model, sample, plan.schedule, b, o);
    runs.push({
      schedule: plan.schedule,
      profiled: stageCosts(profile.layers, b, { lossMs }),
      events: r.events,
    });
    const uncalibrated = predictPlan(plan, overheads);
    measured.push({ name, boundaries: [...b], ms: r.stepMs, uncalibrated, spread: spreadOf(r) });
  }
  if (runs.length === 0) return null;
  const fit = fitCalibration(runs, overheads);
  const costs = measured.map((m) =>
    stageCosts(profile.layers, m.boundaries, {
      lossMs,
      actionMs: fit.overheads.actionMs,
      factors: fit.factors,
    })
  );
  // What the spans and gaps leave out, per step: fitted to the runs' periods.
  const stepMs = fitStepOverhead(
    runs.map((run, i) => ({ schedule: run.schedule, costs: costs[i], measuredMs: measured[i].ms })),
    fit.overheads,
  );
  const calibrated = { ...fit.overheads, stepMs };
  const checks: CalibrationCheck[] = runs.map((run, i) => ({
    schedule: measured[i].name,
    boundaries: measured[i].boundaries,
    measuredMs: measured[i].ms,
    predictedMs: predictStep(run.schedule, costs[i], calibrated).stepMs,
    uncalibratedMs: measured[i].uncalibrated,
    spread: measured[i].spread,
  }));
  return {
    ...fit,
    overheads: calibrated,
    ranks,
    microBatches,
    runs: checks,
    spread: Math.max(...checks.map((c) => c.spread)),
    elapsedMs: performance.now() - t0,
  };
}
