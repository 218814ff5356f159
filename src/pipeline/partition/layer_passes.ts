/**
 * Measured F, I and W times of every layer of a model, as a pipeline runs
 * them: a full forward sweep (each layer's forward keeping its state), the
 * loss, a full input-gradient sweep (I, last layer first; the first layer
 * skips its input gradient, as stage 0 does), then a full weight-gradient
 * sweep (W), repeated after warm-up sweeps; optionally each layer's
 * optimizer step. The model is left as it was.
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import type { Layer } from "../../nn/layer.ts";
import { Sequential } from "../../nn/sequential.ts";
import { crossEntropyLoss, mseLoss } from "../../nn/losses.ts";
import { gradNormSquared } from "../../nn/clip_grad_norm.ts";
import {
  checkOptimizerSpec,
  createOptimizer,
  type OptimizerSpec,
} from "../../nn/optimizer_spec.ts";
import type { Shape, Tensor } from "../../tensor/mod.ts";
import * as ops from "../../tensor/ops.ts";
import { describeValue } from "../../text/describe.ts";

// A string in quotes (the value as written), anything else described.
const quote = (v: unknown): string => typeof v === "string" ? JSON.stringify(v) : describeValue(v);

/** Repeated timings of one pass, ms. */
export interface PassTiming {
  /** Median over the repeats. */
  readonly median: number;
  /** Fastest repeat. */
  readonly min: number;
  /** Slowest repeat. */
  readonly max: number;
}

/** One layer's measured passes for one micro-batch. */
export interface LayerPasses {
  /** The layer's type name. */
  readonly kind: string;
  /** Shape of the input that reached it. */
  readonly inputShape: Shape;
  /** Shape of its output. */
  readonly outputShape: Shape;
  /** Trainable scalars. */
  readonly params: number;
  /** Bytes of its parameters (as many again for their gradients). */
  readonly paramBytes: number;
  /** Forward, keeping state for the backward. */
  readonly F: PassTiming;
  /** Input gradient (for layer 0: without its input gradient, as stage 0 runs it). */
  readonly I: PassTiming;
  /** Weight gradient. */
  readonly W: PassTiming;
  /**
   * With `optimizer`: the optimizer step of this layer's parameters and the
   * gradients' zeroing (with `stepCheck`, also the copies and the gradient
   * norm that the pipeline's step check takes first). Absent for a layer
   * without parameters.
   */
  readonly step?: PassTiming;
  /** With `optimizer`: bytes of the optimizer's state for this layer (after its first step). */
  readonly optimizerStateBytes?: number;
  /** With `optimizer` and `stepCheck`: bytes the step check copies (parameters and state). */
  readonly stepCopyBytes?: number;
}

/** What {@linkcode profileLayerPasses} measured. */
export interface PassProfile {
  /** Rows (dim 0) of the input profiled: the micro-batch size. */
  readonly rows: number;
  /** Backend name. */
  readonly backend: string;
  /** One entry per layer, in model order. */
  readonly layers: readonly LayerPasses[];
  /** With `targets`: the loss on the last layer's output (and its gradient), ms. */
  readonly loss?: PassTiming;
  /** Per timed sweep: Σ over layers of F + I + W (and the loss), ms. */
  readonly totals: readonly number[];
  /**
   * How much the sweeps differed: the interquartile range of `totals` over
   * their median, `(q3 − q1) / median` (robust to a stray slow sweep).
   */
  readonly spread: number;
}

/** Options of {@linkcode profileLayerPasses}. */
export interface PassProfileOptions {
  /** Timed sweeps; the median is reported. Integer ≥ 1, default 5. */
  readonly repeats?: number;
  /** Untimed sweeps first (compilation, caches). Integer ≥ 0, default 1. */
  readonly warmup?: number;
  /**
   * Keep sweeping past `repeats` until the timed sweeps add up to this many
   * ms (at most 20 × `repeats` sweeps): small models, whose sweeps take
   * milliseconds, get enough samples for a stable median. Default 0.
   */
  readonly minTimeMs?: number;
  /** Targets of the loss on the last layer's output (shape as the loss needs). */
  readonly targets?: Tensor;
  /** The loss with `targets` (default `"cross-entropy"`). */
  readonly loss?: "cross-entropy" | "mse";
  /** Rows the loss averages over in the whole batch (default those of this call). */
  readonly totalRows?: number;
  /** Time each layer's optimizer step with this optimizer (restored afterwards). */
  readonly optimizer?: OptimizerSpec;
  /**
   * Time the step as a pipeline with its non-finite check steps (default
   * true): copies of the parameters and optimizer state, and the gradient
   * norm, before the step.
   */
  readonly stepCheck?: boolean;
}

const KEY = "__conveyor_passes__";

function layersOf(model: Sequential | readonly Layer[]): readonly Layer[] {
  if (model instanceof Sequential) return model.layers;
  if (Array.isArray(model)) return model;
  throw new TypeError(
    `model must be a Sequential or an array of layers, got ${describeValue(model)}`,
  );
}

function count(name: string, v: unknown, fallback: number, min: number): number {
  const n = v ?? fallback;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${describeValue(v)}`);
  }
  return n;
}

/**
 * `(q3 − q1) / median` of `xs` (quartiles by linear interpolation; 0 for
 * an empty list or a median of 0).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { relativeSpread } from "@conveyor/core/analysis";
 * assert.equal(relativeSpread([10, 10, 10]), 0);
 * assert.equal(relativeSpread([8, 9, 10, 11, 12]), (11 - 9) / 10);
 * assert.equal(relativeSpread([8, 9, 10, 11, 1000]), (11 - 9) / 10); // one stray sweep
 * ```
 */
export function relativeSpread(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => {
    const at = p * (s.length - 1);
    const lo = Math.floor(at);
    return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (at - lo);
  };
  const m = q(0.5);
  return m > 0 ? (q(0.75) - q(0.25)) / m : 0;
}

/** Median, min and max of `xs` (not empty). */
export function passTiming(xs: readonly number[]): PassTiming {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  const median = n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return { median, min: s[0], max: s[n - 1] };
}

// Lets timers and messages through (a worker's heartbeats) between passes.
const turn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Measures each layer's F, I and W on the layers' backend for `input` (a
 * micro-batch), as a pipeline stage runs them: every sweep runs the
 * forwards in order (state kept), the loss when `targets` are given, the
 * input gradients last layer first (layer 0 with `needInputGrad: false`),
 * then the weight gradients; the first `warmup` sweeps are not timed. The
 * passes of a sweep run back to back, as in a stage, each timed from the
 * end of the one before (on a device backend, to its `sync()`). With `optimizer`, each layer's
 * step is timed too (see {@linkcode LayerPasses.step}). Parameters,
 * gradients and every layer's state are as before afterwards (bitwise on
 * the CPU backend). Bad options are refused before any work.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear, ReLU, Sequential } from "@conveyor/core";
 * import { profileLayerPasses } from "@conveyor/core/analysis";
 * const be = new CpuBackend();
 * const model = new Sequential([new Linear(be, 4, 8), new ReLU(be), new Linear(be, 8, 2)]);
 * const x = be.zeros([16, 4]);
 * const p = await profileLayerPasses(model, x, { repeats: 2, optimizer: { kind: "sgd", lr: 0.1 } });
 * assert.deepEqual(p.layers.map((l) => l.kind), ["Linear", "ReLU", "Linear"]);
 * assert.equal(p.layers[0].paramBytes, 40 * 4);
 * assert.ok(p.layers.every((l) => l.F.median >= 0 && l.I.min <= l.I.max));
 * assert.equal(p.layers[1].step, undefined); // ReLU has no parameters
 * x.dispose();
 * model.dispose();
 * ```
 */
export async function profileLayerPasses(
  model: Sequential | readonly Layer[],
  input: Tensor,
  options: PassProfileOptions = {},
): Promise<PassProfile> {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, [
    "repeats",
    "warmup",
    "minTimeMs",
    "targets",
    "loss",
    "totalRows",
    "optimizer",
    "stepCheck",
  ], "profileLayerPasses: ");
  const repeats = count("repeats", options.repeats, 5, 1);
  const warmup = count("warmup", options.warmup, 1, 0);
  const minTimeMs = options.minTimeMs ?? 0;
  if (typeof minTimeMs !== "number" || !(minTimeMs >= 0) || !Number.isFinite(minTimeMs)) {
    throw new RangeError(`minTimeMs must be a finite number >= 0, got ${describeValue(minTimeMs)}`);
  }
  const layers = layersOf(model);
  if (layers.length === 0) throw new RangeError("model must have at least one layer");
  const loss = options.loss ?? "cross-entropy";
  if (loss !== "cross-entropy" && loss !== "mse") {
    throw new TypeError(`loss must be "cross-entropy" or "mse", got ${quote(loss)}`);
  }
  const optimizer = options.optimizer === undefined
    ? undefined
    : checkOptimizerSpec(options.optimizer);
  const stepCheck = options.stepCheck ?? true;
  if (typeof stepCheck !== "boolean") {
    throw new TypeError(`stepCheck must be a boolean, got ${describeValue(stepCheck)}`);
  }
  const shapes: Shape[] = [];
  let s: Shape = input.shape;
  for (const l of layers) {
    shapes.push(s);
    s = l.outputShape(s); // refuses bad shapes before any work
  }
  const rows = input.shape[0] ?? 1;
  const lossOpts = options.totalRows === undefined
    ? {}
    : { totalRows: count("totalRows", options.totalRows, 1, 1) };
  const backend = input.backend;
  for (const l of layers) {
    if (l.heldKeys().includes(KEY)) throw new Error(`a layer already holds state for ${KEY}`);
  }

  const params = layers.map((l) => l.parameters());
  const saved = params.flat().map((p) => ({ p, g: ops.copy(p.grad) }));
  const F = layers.map((): number[] => []);
  const I = layers.map((): number[] => []);
  const W = layers.map((): number[] => []);
  const lossTimes: number[] = [];
  const steps: (LayerStep | undefined)[] = [];
  const timed = async (out: number[] | null, work: () => void): Promise<void> => {
    await backend.sync();
    const t0 = performance.now();
    work();
    await backend.sync();
    if (out !== null) out.push(performance.now() - t0);
  };
  // The passes of a sweep run back to back, as in a stage: each is dated
  // from the end of the one before (a device backend waits for each, to
  // tell them apart; the CPU's work is done when the call returns).
  const cpu = backend.name === "cpu";
  const sweep = async (
    times: number[][] | null,
    order: readonly number[],
    pass: (i: number) => void,
  ): Promise<void> => {
    await backend.sync();
    let t = performance.now();
    for (const i of order) {
      pass(i);
      if (!cpu) await backend.sync();
      const now = performance.now();
      times?.[i].push(now - t);
      t = now;
    }
    await turn();
  };
  const up = layers.map((_, i) => i);
  const down = [...up].reverse();
  try {
    let spent = 0;
    for (let r = 0; r < warmup + repeats || (spent < minTimeMs && r < warmup + 20 * repeats); r++) {
      const keep = r >= warmup;
      const t0 = performance.now();
      let h = ops.copy(input);
      await sweep(keep ? F : null, up, (i) => {
        const y = layers[i].forward(h, { key: KEY, training: true, step: 0 });
        h.dispose();
        h = y;
      });
      let dy!: Tensor;
      if (options.targets !== undefined) {
        const targets = options.targets;
        await timed(keep ? lossTimes : null, () => {
          const t = ops.copy(targets);
          const res = loss === "mse" ? mseLoss(h, t, lossOpts) : crossEntropyLoss(h, t, lossOpts);
          t.dispose();
          res.loss.dispose();
          dy = res.grad;
        });
      } else {
        dy = ops.scale(h, 0.5); // any dy of the right shape: values barely matter
      }
      h.dispose();
      let g: Tensor | null = dy;
      await sweep(keep ? I : null, down, (i) => {
        const next = layers[i].backwardInput(g!, KEY, { needInputGrad: i > 0 });
        g!.dispose();
        g = next;
      });
      (g as Tensor | null)?.dispose();
      await sweep(keep ? W : null, down, (i) => layers[i].backwardWeight(KEY));
      if (keep) spent += performance.now() - t0;
    }
    for (let i = 0; i < layers.length; i++) {
      steps.push(
        optimizer === undefined || params[i].length === 0
          ? undefined
          : await timeStep(layers[i], optimizer, stepCheck, warmup, F[0].length, timed),
      );
    }
  } finally {
    for (const l of layers) l.dropState(KEY);
    for (const { p, g } of saved) {
      ops.copyInPlace(p.grad, g);
      g.dispose();
    }
  }
  const totals = Array.from({ length: F[0].length }, (_, r) => {
    let t = lossTimes[r] ?? 0;
    for (let i = 0; i < layers.length; i++) t += F[i][r] + I[i][r] + W[i][r];
    return t;
  });
  return {
    rows,
    backend: backend.name,
    layers: layers.map((l, i) => ({
      kind: l.kind,
      inputShape: [...shapes[i]],
      outputShape: [...(i + 1 < layers.length ? shapes[i + 1] : s)],
      params: params[i].reduce((a, p) => a + p.value.size, 0),
      paramBytes: params[i].reduce((a, p) => a + p.value.bytes, 0),
      F: passTiming(F[i]),
      I: passTiming(I[i]),
      W: passTiming(W[i]),
      ...(steps[i] ?? {}),
    })),
    ...(options.targets === undefined ? {} : { loss: passTiming(lossTimes) }),
    totals,
    spread: relativeSpread(totals),
  };
}

interface LayerStep {
  readonly step: PassTiming;
  readonly optimizerStateBytes: number;
  readonly stepCopyBytes?: number;
}

// Times one layer's optimizer step (as a stage steps: check copies, step,
// zeroGrad); the parameters are restored from a copy taken first.
async function timeStep(
  layer: Layer,
  spec: OptimizerSpec,
  check: boolean,
  warmup: number,
  repeats: number,
  timed: (out: number[] | null, work: () => void) => Promise<void>,
): Promise<LayerStep> {
  const params = layer.parameters();
  const mem = params[0].value.backend.memory;
  const opt = createOptimizer(spec, params);
  const before = opt.snapshot();
  const times: number[] = [];
  let stateBytes = 0;
  let copyBytes = 0;
  try {
    const live0 = mem.liveBytes;
    opt.step(); // the first step allocates the optimizer's state
    stateBytes = mem.liveBytes - live0;
    for (let r = 0; r < warmup + repeats; r++) {
      let norm: Promise<number> | null = null;
      let snap: { dispose(): void } | null = null;
      await timed(r >= warmup ? times : null, () => {
        if (check) {
          const l0 = mem.liveBytes;
          snap = opt.snapshot();
          copyBytes = mem.liveBytes - l0;
          norm = gradNormSquared(params);
        }
        opt.step();
        layer.zeroGrad();
      });
      (snap as { dispose(): void } | null)?.dispose();
      await norm;
      await turn();
    }
    opt.restore(before);
  } finally {
    before.dispose();
    opt.dispose();
  }
  return {
    step: passTiming(times),
    optimizerStateBytes: stateBytes,
    ...(check ? { stepCopyBytes: copyBytes } : {}),
  };
}
