/**
 * A model summary as tfjs's `model.summary()` prints it, per pipeline
 * stage: each layer's name, type, output shape and parameters, and for each
 * stage of a partition its layers, parameters, and bytes of parameters,
 * gradients and optimizer state, and the activation it hands to the next.
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import type { Sequential } from "../../nn/sequential.ts";
import { Sequential as SequentialClass } from "../../nn/sequential.ts";
import {
  checkOptimizerSpec,
  type OptimizerSpec,
  optimizerStateSlots,
} from "../../nn/optimizer_spec.ts";
import type { Shape } from "../../tensor/mod.ts";
import { describeValue } from "../../text/describe.ts";
import { validatePartition } from "./partition.ts";

/** Options of {@linkcode summary}. */
export interface SummaryOptions {
  /** Shape of one input batch (dim 0 the rows), e.g. `[16, 64]` token ids. */
  readonly inputShape: Shape;
  /** Stage s holds layers `[boundaries[s], boundaries[s + 1])` (default one stage). */
  readonly boundaries?: readonly number[];
  /** The rank of each stage (default stage s on rank s). */
  readonly stageToRank?: readonly number[];
  /** Counts its state per parameter (AdamW: 2, SGD with momentum: 1; default none). */
  readonly optimizer?: OptimizerSpec;
}

/** One layer's line. */
export interface LayerSummary {
  /** Index in the model. */
  readonly index: number;
  /** Its name (the parameter-name prefix). */
  readonly name: string;
  /** Its type. */
  readonly kind: string;
  /** Output shape for the input shape. */
  readonly outputShape: Shape;
  /** Trainable scalars. */
  readonly params: number;
  /** The stage that holds it. */
  readonly stage: number;
}

/** One stage's totals. */
export interface StageSummary {
  /** Global stage index. */
  readonly stage: number;
  /** Its rank. */
  readonly rank: number;
  /** First layer and one past the last. */
  readonly layers: readonly [number, number];
  /** Trainable scalars. */
  readonly params: number;
  /** Bytes of parameters (f32). */
  readonly parameterBytes: number;
  /** Bytes of their gradients. */
  readonly gradientBytes: number;
  /** Bytes of the optimizer's state for them. */
  readonly optimizerStateBytes: number;
  /** Shape of the stage's output for the input batch. */
  readonly outputShape: Shape;
  /** Its bytes: what the stage hands to the next one per batch (per micro-batch: a share). */
  readonly outputBytes: number;
}

/** What {@linkcode summary} returns. */
export interface ModelSummary {
  /** One entry per layer. */
  readonly layers: readonly LayerSummary[];
  /** One entry per stage. */
  readonly stages: readonly StageSummary[];
  /** Trainable scalars in all. */
  readonly totalParams: number;
  /** Parameters, gradients and optimizer state in all, bytes. */
  readonly totalBytes: number;
  /** The table as text. */
  readonly text: string;
}

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toPrecision(3)} ${units[u]}`;
}

const shape = (s: Shape) => `[${s.join(", ")}]`;
const count = (n: number) => n.toLocaleString("en-US");

/**
 * Summarises `model` for an input of `inputShape`, cut at `boundaries`:
 * each layer's name, type, output shape, parameters and stage, and each
 * stage's rank, parameters, bytes of parameters, gradients and optimizer
 * state, and output (the activation it hands on); `text` lays them out as
 * tfjs's `model.summary()` does, one block per stage. Shapes the layers
 * refuse and bad boundaries are errors naming the value.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, ReLU, Sequential } from "@conveyor/core";
 * import { summary } from "@conveyor/core/analysis";
 * const be = new CpuBackend();
 * const net = new Sequential([new Linear(be, 4, 8), new ReLU(be), new Linear(be, 8, 2)]);
 * const s = summary(net, { inputShape: [16, 4], boundaries: [0, 2, 3], optimizer: { kind: "adamw" } });
 * assert.deepEqual(s.stages.map((c) => c.params), [40, 18]);
 * assert.equal(s.stages[0].optimizerStateBytes, 2 * 40 * 4);
 * assert.deepEqual(s.stages[0].outputShape, [16, 8]);
 * assert.equal(s.totalBytes, 58 * 4 * 4); // parameters, gradients, two moments
 * console.log(s.text);
 * net.dispose();
 * ```
 */
export function summary(model: Sequential, options: SummaryOptions): ModelSummary {
  if (!(model instanceof SequentialClass)) {
    throw new TypeError(`model must be a Sequential, got ${describeValue(model)}`);
  }
  if (options === null || typeof options !== "object" || !Array.isArray(options.inputShape)) {
    throw new TypeError(
      `options must be an object { inputShape, ... }, got ${describeValue(options)}`,
    );
  }
  checkOptionSpelling(
    options,
    ["inputShape", "boundaries", "stageToRank", "optimizer"],
    "summary: ",
  );
  const L = model.layers.length;
  const boundaries = options.boundaries ?? [0, L];
  validatePartition(boundaries, L);
  const S = boundaries.length - 1;
  const where = options.stageToRank ?? Array.from({ length: S }, (_, s) => s);
  if (
    !Array.isArray(where) || where.length !== S ||
    where.some((r) => !Number.isInteger(r) || r < 0)
  ) {
    throw new RangeError(
      `stageToRank must hold one rank (an integer >= 0) per stage (${S}), got ${
        describeValue(where)
      }`,
    );
  }
  const slots = options.optimizer === undefined
    ? 0
    : optimizerStateSlots(checkOptimizerSpec(options.optimizer)).length;
  const shapes = model.shapes([...options.inputShape]);
  const stageOf = (i: number) => boundaries.findIndex((_b, s) => s < S && i < boundaries[s + 1]);
  const layers: LayerSummary[] = model.layers.map((l, i) => ({
    index: i,
    name: model.names[i],
    kind: l.kind,
    outputShape: shapes[i],
    params: l.parameters().reduce((a, p) => a + p.value.size, 0),
    stage: stageOf(i),
  }));
  const paramBytes = model.layers.map((l) => l.parameters().reduce((a, p) => a + p.value.bytes, 0));
  const stages: StageSummary[] = Array.from({ length: S }, (_, s) => {
    let params = 0;
    let pb = 0;
    for (let i = boundaries[s]; i < boundaries[s + 1]; i++) {
      params += layers[i].params;
      pb += paramBytes[i];
    }
    const out = shapes[boundaries[s + 1] - 1];
    return {
      stage: s,
      rank: where[s],
      layers: [boundaries[s], boundaries[s + 1]] as const,
      params,
      parameterBytes: pb,
      gradientBytes: pb,
      optimizerStateBytes: slots * pb,
      outputShape: out,
      outputBytes: 4 * out.reduce((a, b) => a * b, 1),
    };
  });
  const totalParams = stages.reduce((a, s) => a + s.params, 0);
  const totalBytes = stages.reduce(
    (a, s) => a + s.parameterBytes + s.gradientBytes + s.optimizerStateBytes,
    0,
  );
  // The text: a tfjs-style table per stage.
  const rows = layers.map((l) => [`${l.name} (${l.kind})`, shape(l.outputShape), count(l.params)]);
  const head = ["Layer (type)", "Output shape", "Param #"];
  const w = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 2 ? c.padStart(w[i]) : c.padEnd(w[i]))).join("   ").trimEnd();
  const rule = (ch: string) => ch.repeat(w[0] + w[1] + w[2] + 6);
  const text: string[] = [rule("_"), line(head), rule("=")];
  for (const st of stages) {
    text.push(
      `stage ${st.stage} (rank ${st.rank}): layers ${st.layers[0]}–${st.layers[1] - 1}`,
    );
    for (let i = st.layers[0]; i < st.layers[1]; i++) text.push(line(rows[i]));
    text.push(
      `  ${count(st.params)} params: ${bytes(st.parameterBytes)} + ${
        bytes(st.gradientBytes)
      } gradients` +
        (slots > 0 ? ` + ${bytes(st.optimizerStateBytes)} optimizer state` : "") +
        `; ${st.stage === S - 1 ? "outputs" : "hands on"} ${shape(st.outputShape)} (${
          bytes(st.outputBytes)
        })`,
      rule("_"),
    );
  }
  text.push(
    `Total params: ${count(totalParams)} (${bytes(totalBytes)} with gradients${
      slots > 0 ? " and optimizer state" : ""
    })`,
  );
  return { layers, stages, totalParams, totalBytes, text: text.join("\n") };
}
