// A small real executor for plug-in tests: stage s multiplies its input by a
// scalar weight w[s]; the loss is the sum of the last stage's outputs. It
// keeps what each pass needs per (stage, micro-batch), accumulates the weight
// gradient in W (or B), steps SGD in `step`, and answers calls for its
// weights. Each step's check carries its squared gradient (normSquared) and
// redoStep redoes the step scaled, for clipping by post-validation. Loaded
// by the workers through its URL, exactly as a model stage would be; `near`
// compares its results with the f64 reference.

import assert from "node:assert/strict";
import type {
  RankExecutor,
  RankExecutorInit,
  StageContext,
} from "../../../src/pipeline/runtime/rank_executor.ts";

export interface AffineOptions {
  /** Initial weight per global stage. */
  readonly weights: readonly number[];
  readonly lr: number;
  /** Make this stage's gradient NaN in this iteration (its step's check fails). */
  readonly poison?: { readonly iteration: number; readonly stage: number };
}

/** The affine executor's calls: its stages' weights. */
export type AffineCalls = { readonly weights: { args: null; result: Record<string, number> } };

export function createRankExecutor(init: RankExecutorInit): RankExecutor<AffineCalls> {
  const o = init.options as AffineOptions;
  const w = new Map(init.stages.map((s) => [s, o.weights[s]]));
  const grad = new Map(init.stages.map((s) => [s, 0]));
  const inputs = new Map<string, Float32Array>();
  const pendingW = new Map<string, Float32Array>();
  let batch: Float32Array[] = [];
  let loss = 0;
  // Weights and gradient of each stage's latest step, until it is committed or rolled back.
  const before = new Map<number, number>();
  const used = new Map<number, number>();
  const k = (ctx: StageContext) => `${ctx.action.stage}/${ctx.action.microBatch}`;
  const dx = (ctx: StageContext, dy: Float32Array) => {
    const x = inputs.get(k(ctx))!;
    const g = dy.length === x.length ? dy : new Float32Array(x.length).fill(1);
    return { x, g, out: g.map((v) => v * w.get(ctx.action.stage)!) };
  };
  const accumulate = (s: number, x: Float32Array, g: Float32Array) => {
    let sum = 0;
    for (let i = 0; i < x.length; i++) sum += x[i] * g[i];
    grad.set(s, grad.get(s)! + sum);
  };
  return {
    beginIteration(_it, payload) {
      if (payload !== undefined) batch = (payload as number[][]).map((a) => Float32Array.from(a));
      loss = 0;
    },
    forward(ctx, input) {
      const x = input ?? batch[ctx.action.microBatch];
      inputs.set(k(ctx), x);
      const y = x.map((v) => v * w.get(ctx.action.stage)!);
      if (ctx.isLastStage) {
        for (const v of y) loss += v;
        return null;
      }
      return y;
    },
    backward(ctx, gradOutput) {
      const { x, g, out } = dx(ctx, gradOutput ?? new Float32Array(0));
      accumulate(ctx.action.stage, x, g);
      inputs.delete(k(ctx));
      return ctx.isFirstStage ? null : out;
    },
    backwardInput(ctx, gradOutput) {
      const { g, out } = dx(ctx, gradOutput ?? new Float32Array(0));
      pendingW.set(k(ctx), g);
      // Hand the result over as a pending read-back, as a GPU stage would.
      return ctx.isFirstStage ? null : { pending: Promise.resolve(out) };
    },
    backwardWeight(ctx) {
      accumulate(ctx.action.stage, inputs.get(k(ctx))!, pendingW.get(k(ctx))!);
      inputs.delete(k(ctx));
      pendingW.delete(k(ctx));
    },
    step(stage, iteration) {
      const g = o.poison?.iteration === iteration && o.poison.stage === stage
        ? NaN
        : grad.get(stage)!;
      grad.set(stage, 0);
      if (!Number.isFinite(g)) {
        return { finite: false, what: "gradient" as const, normSquared: g * g };
      }
      before.set(stage, w.get(stage)!);
      used.set(stage, g);
      w.set(stage, w.get(stage)! - o.lr * g);
      return { finite: true, normSquared: g * g };
    },
    rollbackStep(stage) {
      if (before.has(stage)) w.set(stage, before.get(stage)!);
      before.delete(stage);
      used.delete(stage);
    },
    commitStep(stage) {
      before.delete(stage);
      used.delete(stage);
    },
    redoStep(stage, _iteration, scale) {
      w.set(stage, before.get(stage)! - o.lr * (used.get(stage)! * scale));
      before.delete(stage);
      used.delete(stage);
    },
    abandonIteration() {
      inputs.clear();
      pendingW.clear();
      for (const s of grad.keys()) grad.set(s, 0);
      loss = 0;
    },
    endIteration: () => ({ loss }),
    calls: {
      weights: () => Object.fromEntries(w),
    },
  };
}

/** The same training computed plainly in f64, one stage after another. */
export function referenceTraining(
  weights: readonly number[],
  lr: number,
  batches: readonly (readonly (readonly number[])[])[],
  skip: ReadonlySet<number> = new Set(),
  clip?: number,
): { weights: number[]; losses: number[]; norms: number[] } {
  const w = [...weights];
  const losses: number[] = [];
  const norms: number[] = [];
  for (const batch of batches) {
    const g = new Array<number>(w.length).fill(0);
    let loss = 0;
    for (const x0 of batch) {
      const xs: number[][] = [[...x0]];
      for (let s = 0; s < w.length; s++) xs.push(xs[s].map((v) => v * w[s]));
      loss += xs[w.length].reduce((a, b) => a + b, 0);
      let dy = x0.map(() => 1);
      for (let s = w.length - 1; s >= 0; s--) {
        g[s] += xs[s].reduce((a, v, i) => a + v * dy[i], 0);
        dy = dy.map((v) => v * w[s]);
      }
    }
    // Global-norm clipping as clipGradNorm: the stages' squares added in stage order.
    let total = 0;
    for (const v of g) total += v * v;
    const norm = Math.sqrt(total);
    const scale = clip !== undefined && norm > clip ? clip / (norm + 1e-6) : 1;
    if (!skip.has(losses.length)) {
      for (let s = 0; s < w.length; s++) w[s] -= lr * (g[s] * scale);
    }
    losses.push(loss);
    norms.push(norm);
  }
  return { weights: w, losses, norms };
}

/** Asserts `got` equals `want` within 1e-5 relative (plus 1e-9), naming `what` and the index. */
export function near(got: readonly number[], want: readonly number[], what: string): void {
  assert.equal(got.length, want.length, what);
  got.forEach((g, i) =>
    assert.ok(
      Math.abs(g - want[i]) <= 1e-5 * Math.abs(want[i]) + 1e-9,
      `${what}[${i}]: ${g} vs ${want[i]}`,
    )
  );
}
