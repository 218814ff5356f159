// Batches and reports of a data-parallel model (D replicas of a P-rank
// pipeline, global rank k·P + p): a training batch cut into D equal shards
// (each replica's payloads), evaluation and prediction batches cut into D
// nearly equal parts whose losses add up, and the replicas' reports read
// back as one pipeline's. Not exported from the package.

import type { Shape } from "../../tensor/mod.ts";
import type { RankGroupRunResult } from "../runtime/rank_group.ts";
import {
  type BatchLayout,
  evenRows,
  predictionPayloads,
  prod,
  splitBatch,
  type TrainingBatch,
} from "./batch.ts";
import type { ModelStagePayload, ModelStageReport } from "./stage_options.ts";

/** Rows `[from, from + rows)` of `b` as a batch of its own. */
function rowsOf(b: TrainingBatch, from: number, rows: number): TrainingBatch {
  const B = b.shape[0];
  const inRow = b.inputs.length / B, tRow = b.targets.length / B;
  return {
    inputs: b.inputs.slice(from * inRow, (from + rows) * inRow),
    shape: [rows, ...b.shape.slice(1)],
    targets: b.targets.slice(from * tRow, (from + rows) * tRow),
  };
}

/**
 * Checks `b` as a whole batch, then splits it into D equal shards (shard k
 * rows `[k·R, (k+1)·R)`, its own mean loss) and each shard into its
 * replica's payloads: D·P payloads in global rank order. The average of
 * the shards' gradients is the whole batch's. Refuses (RangeError, before
 * any work) rows that are not a multiple of D, shards of fewer rows than
 * micro-batches, and `microBatchSizes` (they split the whole batch).
 */
export function shardPayloads(
  layout: BatchLayout,
  b: TrainingBatch,
  where: string,
  step: number | undefined,
  replicas: number,
): ModelStagePayload[] {
  const whole = splitBatch(layout, b, where, step);
  if (replicas === 1) return whole;
  const B = b.shape[0], m = layout.schedule.microBatches;
  if (b.microBatchSizes !== undefined) {
    throw new RangeError(
      `${where}.microBatchSizes [${
        [...b.microBatchSizes].join(", ")
      }] split the whole batch, but with dataParallel ${replicas} each replica splits its own ` +
        "shard: leave them out",
    );
  }
  if (B % replicas !== 0) {
    throw new RangeError(
      `${where} has ${B} rows (dim 0), which cannot be split into ${replicas} equal ` +
        `data-parallel shards (dataParallel ${replicas}): the rows must be a multiple of ${replicas}`,
    );
  }
  const R = B / replicas;
  if (R < m) {
    throw new RangeError(
      `${where} has ${B} rows: each of the ${replicas} data-parallel shards gets ${R}, fewer than ` +
        `the ${m} micro-batches (each needs a row): give at least ${replicas * m} rows`,
    );
  }
  return Array.from(
    { length: replicas },
    (_, k) => splitBatch(layout, rowsOf(b, k * R, R), where, step, { firstRow: k * R }),
  ).flat();
}

/**
 * Each global rank's payload for a forward-only evaluation of `b` (checked
 * as a training batch first): D parts of nearly equal rows (the larger
 * first), each replica's loss a share of the whole batch's mean, so that
 * the replicas' losses add up to it. Refuses fewer than D·m rows.
 */
export function evaluationPayloads(
  layout: BatchLayout,
  b: TrainingBatch,
  where: string,
  replicas: number,
): ModelStagePayload[] {
  const whole = splitBatch(layout, b, where);
  if (replicas === 1) return whole;
  const B = b.shape[0], m = layout.schedule.microBatches;
  if (B < replicas * m) {
    throw new RangeError(
      `${where} has ${B} rows (dim 0), fewer than the ${replicas * m} that ${replicas} ` +
        `data-parallel replicas of ${m} micro-batches need (a row each)`,
    );
  }
  let at = 0;
  return evenRows(B, replicas).flatMap((r) => {
    const part = splitBatch(layout, rowsOf(b, at, r), where, undefined, {
      firstRow: at,
      totalRows: whole[0].totalRows,
    });
    at += r;
    return part;
  });
}

/**
 * Each global rank's payload for a forward-only prediction of `inputs`
 * (shape `shape`, at least D·m rows): D parts of nearly equal rows, each
 * in m micro-batches.
 */
export function replicaPredictionPayloads(
  layout: BatchLayout,
  shape: readonly number[],
  inputs: Float32Array,
  replicas: number,
): ModelStagePayload[] {
  const m = layout.schedule.microBatches;
  const inRow = prod(shape.slice(1));
  let at = 0;
  return evenRows(shape[0], replicas).flatMap((r) => {
    const partShape: Shape = [r, ...shape.slice(1)];
    const part = predictionPayloads(
      layout,
      partShape,
      layout.model.shapes(partShape),
      evenRows(r, m),
      inputs.slice(at * inRow, (at + r) * inRow),
      { firstRow: at },
    );
    at += r;
    return part;
  });
}

/**
 * A data-parallel run's reports read as one pipeline's: the last stage's
 * report of replica 0 (global rank `lastRank`) carries the average of the
 * D replicas' losses (summed in replica order), the whole batch's mean
 * loss when the shards are equal; every rank's report stays (peaks per
 * global rank). With one replica, the run as it is.
 */
export function averageReplicaLosses(
  run: RankGroupRunResult,
  pipelineRanks: number,
  replicas: number,
  lastRank: number,
): RankGroupRunResult {
  if (replicas === 1) return run;
  const reports = run.reports.map((rs) => [...rs]);
  const last = reports[lastRank] as ModelStageReport[];
  for (let i = 0; i < last.length; i++) {
    let sum = 0;
    for (let k = 0; k < replicas; k++) {
      const r = reports[k * pipelineRanks + lastRank][i] as ModelStageReport | undefined;
      sum += r?.loss ?? NaN;
    }
    last[i] = { ...last[i], loss: sum / replicas };
  }
  return { ...run, reports };
}

/**
 * The replicas' last-stage reports of a forward-only run, in replica order
 * (global ranks `k·P + lastRank`).
 */
export function replicaReports(
  run: RankGroupRunResult,
  pipelineRanks: number,
  replicas: number,
  lastRank: number,
): ModelStageReport[] {
  return Array.from(
    { length: replicas },
    (_, k) => run.reports[k * pipelineRanks + lastRank][0] as ModelStageReport,
  );
}
