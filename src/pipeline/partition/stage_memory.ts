/**
 * Measured activation memory of one pipeline stage for one micro-batch:
 * what each of its passes (F, I, W, B) raises the backend's live bytes to,
 * above what was live before it, and what the stage keeps between them, as
 * a pipeline stage runs them (its input copied onto the backend, its output
 * released once sent, the loss and its gradient on the last stage).
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import type { Layer } from "../../nn/layer.ts";
import { crossEntropyLoss, mseLoss } from "../../nn/losses.ts";
import type { Tensor } from "../../tensor/mod.ts";
import * as ops from "../../tensor/ops.ts";
import { describeValue } from "../../text/describe.ts";

// A string in quotes (the value as written), anything else described.
const quote = (v: unknown): string => typeof v === "string" ? JSON.stringify(v) : describeValue(v);

/**
 * One stage's activation bytes for one micro-batch. Peaks are above the
 * live bytes just before the pass (what other micro-batches hold is not in
 * them); `afterForward` and `afterInputGrad` are what stays from the
 * forward to the end of I (or B), and from I to W.
 */
export interface StageMemory {
  /** Highest live bytes during F (input copy, layer states, temporaries, output, loss). */
  readonly forwardPeak: number;
  /** Kept after F until the backward: the layers' states (and the loss gradient, last stage). */
  readonly afterForward: number;
  /** Highest live bytes during I, above those before it. */
  readonly inputGradPeak: number;
  /** Kept after I until W: what the weight gradients need. */
  readonly afterInputGrad: number;
  /** Highest live bytes during W, above those before it. */
  readonly weightGradPeak: number;
  /** Highest live bytes during B (I then W in one pass), above those before it. */
  readonly backwardPeak: number;
}

/** Options of {@linkcode profileStageMemory}. */
export interface StageMemoryOptions {
  /** The stage is the model's first: its I skips the input gradient (default false). */
  readonly first?: boolean;
  /** The stage is the last: its F ends in the loss on these targets, its backward starts from it. */
  readonly targets?: Tensor;
  /** The loss with `targets` (default `"cross-entropy"`). */
  readonly loss?: "cross-entropy" | "mse";
  /** Rows the loss averages over in the whole batch (default those of this call). */
  readonly totalRows?: number;
}

const KEY = "__conveyor_stage_memory__";

/**
 * Runs F, I, W, then F and B of `stage` on `input` (one micro-batch) and
 * reads the backend's memory counters around each pass; every tensor it
 * made is released and every parameter gradient restored afterwards.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, ReLU, Sequential } from "@conveyor/core";
 * import { profileStageMemory } from "@conveyor/core/analysis";
 * const be = new CpuBackend();
 * const stage = new Sequential([new Linear(be, 4, 8), new ReLU(be)]);
 * const x = be.zeros([16, 4]);
 * const m = await profileStageMemory(stage, x);
 * assert.ok(m.afterForward > 0 && m.forwardPeak >= m.afterForward);
 * assert.ok(m.afterInputGrad <= m.afterForward);
 * x.dispose();
 * stage.dispose();
 * ```
 */
export async function profileStageMemory(
  stage: Layer,
  input: Tensor,
  options: StageMemoryOptions = {},
): Promise<StageMemory> {
  if (stage === null || typeof stage !== "object" || typeof stage.forward !== "function") {
    throw new TypeError(`stage must be a layer (a Sequential), got ${describeValue(stage)}`);
  }
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, ["first", "targets", "loss", "totalRows"], "profileStageMemory: ");
  const loss = options.loss ?? "cross-entropy";
  if (loss !== "cross-entropy" && loss !== "mse") {
    throw new TypeError(`loss must be "cross-entropy" or "mse", got ${quote(loss)}`);
  }
  const outShape = stage.outputShape(input.shape);
  const lossOpts = options.totalRows === undefined ? {} : { totalRows: options.totalRows };
  const need = { needInputGrad: options.first !== true };
  const backend = input.backend;
  const mem = backend.memory;
  const saved = stage.parameters().map((p) => ({ p, g: ops.copy(p.grad) }));
  const dyData = new Float32Array(outShape.reduce((a, b) => a * b, 1)).fill(0.01);
  let lossGrad: Tensor | null = null;
  let lossValue: Tensor | null = null;
  const forward = (): void => {
    const x = ops.copy(input); // the stage's copy of the data it receives
    let y: Tensor;
    try {
      y = stage.forward(x, { key: KEY, training: true, step: 0 });
    } finally {
      x.dispose();
    }
    if (options.targets === undefined) {
      y.dispose(); // sent to the next stage
      return;
    }
    const t = ops.copy(options.targets);
    try {
      const r = loss === "mse" ? mseLoss(y, t, lossOpts) : crossEntropyLoss(y, t, lossOpts);
      lossGrad = r.grad;
      lossValue = r.loss;
    } finally {
      t.dispose();
      y.dispose();
    }
  };
  const gradIn = (): Tensor => {
    if (lossGrad !== null) {
      const g = lossGrad;
      lossGrad = null;
      return g;
    }
    return backend.fromData(dyData.slice(), outShape);
  };
  const peakOf = (work: () => void): number => {
    const before = mem.liveBytes;
    mem.resetPeak();
    work();
    return mem.peakBytes - before;
  };
  try {
    await backend.sync();
    const live0 = mem.liveBytes;
    const forwardPeak = peakOf(forward);
    const afterForward = mem.liveBytes - live0;
    const inputGradPeak = peakOf(() => {
      const dy = gradIn();
      const dx = stage.backwardInput(dy, KEY, need);
      dy.dispose();
      dx?.dispose();
    });
    const afterInputGrad = mem.liveBytes - live0;
    const weightGradPeak = peakOf(() => stage.backwardWeight(KEY));
    (lossValue as Tensor | null)?.dispose();
    lossValue = null;
    forward();
    const backwardPeak = peakOf(() => {
      const dy = gradIn();
      const dx = stage.backward(dy, KEY, need);
      dy.dispose();
      dx?.dispose();
    });
    await backend.sync();
    return {
      forwardPeak,
      afterForward,
      inputGradPeak,
      afterInputGrad,
      weightGradPeak,
      backwardPeak,
    };
  } finally {
    stage.dropState(KEY);
    (lossGrad as Tensor | null)?.dispose();
    (lossValue as Tensor | null)?.dispose();
    for (const { p, g } of saved) {
      ops.copyInPlace(p.grad, g);
      g.dispose();
    }
  }
}
