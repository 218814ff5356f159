/**
 * Training batches: their checks, and their split into micro-batches as
 * each rank's per-iteration payload (row counts and shapes for every rank,
 * the inputs for the rank of stage 0, the targets for the rank of the last
 * stage).
 *
 * @module
 */

import type { Shape } from "../../tensor/mod.ts";
import type { Sequential } from "../../nn/sequential.ts";
import type { Schedule } from "../schedule/schedule.ts";
import type { ModelStagePayload, PipelineLoss } from "./model_rank_executor.ts";
import { describeValue, formatShape } from "../../text/describe.ts";

/** One training batch: inputs along dim 0, and the targets of the loss. */
export interface TrainingBatch {
  /** Inputs, row-major (token ids as f32 for a GPT). */
  readonly inputs: Float32Array;
  /** Input shape; dim 0 (the batch) is cut into micro-batches. */
  readonly shape: Shape;
  /**
   * Targets: class ids shaped as the prediction without its last dim
   * (cross-entropy), or shaped as the prediction (mse).
   */
  readonly targets: Float32Array;
  /** Rows of each micro-batch (default: as even as possible, the larger first); sums to dim 0. */
  readonly microBatchSizes?: readonly number[];
}

/** What the split needs to know of the model. */
export interface BatchLayout {
  readonly model: Sequential;
  readonly loss: PipelineLoss;
  readonly schedule: Schedule;
  /** Partition boundaries: stage s holds layers [b[s], b[s + 1]). */
  readonly boundaries: readonly number[];
}

/** `n` rows in `m` parts as even as possible, the larger first. */
export function evenRows(n: number, m: number): number[] {
  const base = Math.floor(n / m), extra = n % m;
  return Array.from({ length: m }, (_, i) => base + (i < extra ? 1 : 0));
}

/** Product of the dimensions. */
export function prod(s: readonly number[]): number {
  let n = 1;
  for (const d of s) n *= d;
  return n;
}

/** Names a Float32Array's length, or what else `x` is (never its values). */
export function describeArray(x: unknown): string {
  if (x instanceof Float32Array) return `a Float32Array of ${x.length}`;
  if (ArrayBuffer.isView(x)) {
    return `a ${x.constructor.name} of ${(x as unknown as { length: number }).length}`;
  }
  if (Array.isArray(x)) return `an Array of ${x.length}`;
  return x === null ? "null" : typeof x;
}

/** Throws a RangeError naming the first non-finite value of `data` (`what[i]`). */
export function checkFinite(data: Float32Array, what: string): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) {
      throw new RangeError(`${what}[${i}] is ${data[i]}: the values must be finite`);
    }
  }
}

/**
 * The vocabulary of the model's first layer when it looks its inputs up by
 * integer id (an `Embedding`'s `numEmbeddings`, a `TokenPositionEmbedding`'s
 * `vocabSize`), with the layer's kind; else undefined.
 */
function idVocabulary(model: Sequential): { size: number; kind: string } | undefined {
  const first = model.layers[0] as unknown as {
    kind: string;
    numEmbeddings?: unknown;
    vocabSize?: unknown;
    layers?: unknown;
  } | undefined;
  if (first === undefined) return undefined;
  if (first.kind === "Sequential" && Array.isArray(first.layers)) {
    return idVocabulary(first as unknown as Sequential);
  }
  const size = first.kind === "Embedding"
    ? first.numEmbeddings
    : first.kind === "TokenPositionEmbedding"
    ? first.vocabSize
    : undefined;
  return typeof size === "number" ? { size, kind: first.kind } : undefined;
}

/**
 * Throws a RangeError naming the first input that is not a token id of the
 * model's first layer (an integer in `[0, vocabulary)`), by its batch row
 * (`firstRow` added: the row of the whole batch) and position in the row.
 * No-op when the first layer takes no ids.
 */
export function checkInputIds(
  model: Sequential,
  data: Float32Array,
  shape: readonly number[],
  what: string,
  firstRow = 0,
): void {
  const vocab = idVocabulary(model);
  if (vocab === undefined) return;
  const V = vocab.size;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (Number.isInteger(v) && v >= 0 && v < V) continue;
    const tail = shape.slice(1);
    const perRow = prod(tail);
    const row = Math.floor(i / perRow) + firstRow;
    const at = i + firstRow * perRow; // the index in the whole batch
    const index: number[] = [];
    let rest = i % perRow;
    for (let d = tail.length - 1; d >= 0; d--) {
      index.unshift(rest % tail[d]);
      rest = Math.floor(rest / tail[d]);
    }
    const position = index.length === 0
      ? ""
      : `, position ${index.length === 1 ? index[0] : `[${index.join(", ")}]`}`;
    throw new RangeError(
      `${what}[${at}] (row ${row}${position}) is ${describeValue(v)}: a token id of the first ` +
        `layer (${vocab.kind}) must be an integer in [0, ${V})`,
    );
  }
}

/** Where a batch sits in a larger one (a data-parallel shard): see {@linkcode splitBatch}. */
export interface ShardPlace {
  /** The batch's first row in the whole batch (default 0). */
  readonly firstRow?: number;
  /** Rows of the loss's mean (default: this batch's own). */
  readonly totalRows?: number;
}

/**
 * Checks `b` (`where` names it in errors) and splits it into each rank's
 * payload for one iteration, training step `step`. `place`: where `b`
 * sits in a larger batch (its first row, for per-row randomness; the rows
 * of the loss's mean).
 */
export function splitBatch(
  layout: BatchLayout,
  b: TrainingBatch,
  where: string,
  step?: number,
  place?: ShardPlace,
): ModelStagePayload[] {
  if (b === null || typeof b !== "object") {
    throw new TypeError(
      `${where} must be an object { inputs, shape, targets }, got ${describeValue(b)}`,
    );
  }
  const shape = Array.isArray(b.shape) ? [...b.shape] : null;
  if (shape === null || shape.length === 0) {
    throw new TypeError(`${where}.shape must be a non-empty array, got ${describeValue(b.shape)}`);
  }
  const m = layout.schedule.microBatches;
  const B = shape[0];
  if (!(b.inputs instanceof Float32Array) || b.inputs.length !== prod(shape)) {
    throw new RangeError(
      `${where}.inputs must be a Float32Array of ${prod(shape)} values for shape [${
        shape.join(", ")
      }], got ${describeArray(b.inputs)}`,
    );
  }
  checkFinite(b.inputs, `${where}.inputs`);
  checkInputIds(layout.model, b.inputs, shape, `${where}.inputs`, place?.firstRow ?? 0);
  if (B < m) {
    throw new RangeError(
      `${where} has ${B} rows (dim 0), fewer than the ${m} micro-batches: each micro-batch ` +
        "needs at least one row",
    );
  }
  const shapes = layout.model.shapes(shape);
  const out = shapes[shapes.length - 1];
  const targetShape = layout.loss === "mse" ? out : out.slice(0, -1);
  if (!(b.targets instanceof Float32Array) || b.targets.length !== prod(targetShape)) {
    throw new RangeError(
      `${where}.targets must be a Float32Array of ${prod(targetShape)} values (shape [${
        targetShape.join(", ")
      }] for ${layout.loss}), got ${describeArray(b.targets)}`,
    );
  }
  if (layout.loss === "mse") checkFinite(b.targets, `${where}.targets`);
  if (layout.loss === "cross-entropy") {
    const V = out[out.length - 1];
    const t = b.targets;
    for (let i = 0; i < t.length; i++) {
      if (!Number.isInteger(t[i]) || t[i] < 0 || t[i] >= V) {
        throw new RangeError(
          `${where}.targets[${i}] must be a class id in [0, ${V}), got ${describeValue(t[i])}`,
        );
      }
    }
  }
  let rows: number[];
  if (b.microBatchSizes !== undefined) {
    rows = [...b.microBatchSizes];
    if (
      rows.length !== m || rows.some((r) => !Number.isInteger(r) || r < 1) ||
      rows.reduce((a, c) => a + c, 0) !== B
    ) {
      throw new RangeError(
        `${where}.microBatchSizes must be ${m} positive integers summing to the ${B} rows, got [${
          rows.join(", ")
        }]`,
      );
    }
  } else {
    rows = evenRows(B, m);
  }
  return payloads(layout, shape, shapes, rows, b.inputs, b.targets, targetShape, step, place);
}

/**
 * Each rank's payload for a forward-only run of `inputs` (shape `shape`,
 * whose per-layer shapes are `shapes`) in `rows` micro-batches.
 */
export function predictionPayloads(
  layout: BatchLayout,
  shape: Shape,
  shapes: Shape[],
  rows: number[],
  inputs: Float32Array,
  place?: ShardPlace,
): ModelStagePayload[] {
  return payloads(layout, shape, shapes, rows, inputs, null, [], undefined, place);
}

function payloads(
  layout: BatchLayout,
  shape: Shape,
  shapes: Shape[],
  rows: number[],
  inputs: Float32Array,
  targets: Float32Array | null,
  targetShape: Shape,
  step?: number,
  place?: ShardPlace,
): ModelStagePayload[] {
  const out = shapes[shapes.length - 1];
  const b0 = layout.boundaries;
  const schedule = layout.schedule;
  const numStages = schedule.stageToRank.length;
  const inputTails = Array.from(
    { length: numStages },
    (_, s) => (b0[s] === 0 ? shape : shapes[b0[s] - 1]).slice(1),
  );
  const inRow = prod(shape.slice(1)), tRow = prod(targetShape.slice(1));
  const inputParts: Float32Array[] = [], targetParts: Float32Array[] = [];
  let at = 0;
  for (const r of rows) {
    inputParts.push(inputs.slice(at * inRow, (at + r) * inRow));
    if (targets !== null) targetParts.push(targets.slice(at * tRow, (at + r) * tRow));
    at += r;
  }
  const common = {
    ...(step === undefined ? {} : { step }),
    ...(place?.firstRow === undefined || place.firstRow === 0 ? {} : { firstRow: place.firstRow }),
    rows,
    totalRows: place?.totalRows ?? prod(out.slice(0, -1)),
    inputTails,
    targetTail: targetShape.slice(1),
  };
  const firstRank = schedule.stageToRank[0];
  const lastRank = schedule.stageToRank[numStages - 1];
  return Array.from({ length: schedule.ranks }, (_, r) => ({
    ...common,
    ...(r === firstRank ? { inputs: inputParts } : {}),
    ...(r === lastRank && targets !== null ? { targets: targetParts } : {}),
  }));
}

/** Checks `predict`'s input; its shape, per-layer shapes and output shape. */
export function checkPredictInput(
  layout: BatchLayout,
  input: { inputs: Float32Array; shape: Shape },
): { shape: number[]; shapes: Shape[]; outShape: Shape } {
  if (input === null || typeof input !== "object") {
    throw new TypeError(
      `predict: input must be an object { inputs, shape }, got ${describeValue(input)}`,
    );
  }
  const shape = Array.isArray(input.shape) ? [...input.shape] : null;
  if (shape === null || shape.length === 0) {
    throw new TypeError(
      `predict: shape must be a non-empty array, got ${describeValue(input.shape)}`,
    );
  }
  const shapes = layout.model.shapes(shape);
  if (!(input.inputs instanceof Float32Array) || input.inputs.length !== prod(shape)) {
    throw new RangeError(
      `predict: inputs must be a Float32Array of ${prod(shape)} values for shape ${
        formatShape(shape)
      }, got ${describeArray(input.inputs)}`,
    );
  }
  checkFinite(input.inputs, "predict: inputs");
  checkInputIds(layout.model, input.inputs, shape, "predict: inputs");
  return { shape, shapes, outShape: shapes[shapes.length - 1] };
}

/** The last stage's outputs per micro-batch, in order, as one array of `size` values. */
export function concatOutputs(
  outputs: readonly { readonly data: Float32Array }[],
  size: number,
): Float32Array {
  const data = new Float32Array(size);
  let at = 0;
  for (const o of outputs) {
    data.set(o.data, at);
    at += o.data.length;
  }
  if (at !== data.length) {
    throw new Error(`predict: the last stage returned ${at} values, expected ${data.length}`);
  }
  return data;
}
