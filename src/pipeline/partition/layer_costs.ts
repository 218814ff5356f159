/**
 * Per-layer costs of a model, as the partitioner's `{ kind, cost }` list:
 * from parameter counts, from the layers' forward FLOPs estimates, from a
 * plain layer count, or measured by a profiling pass on the current backend.
 *
 * @module
 */

import type { Layer } from "../../nn/layer.ts";
import { Sequential } from "../../nn/sequential.ts";
import type { Shape, Tensor } from "../../tensor/mod.ts";
import * as ops from "../../tensor/ops.ts";
import type { CostedLayer } from "./partition.ts";
import { describeValue } from "../../text/describe.ts";

/**
 * Where static layer costs come from: `"params"` (trainable scalars, as
 * DeepSpeed's `parameters` method), `"flops"` (forward FLOPs for the input
 * shape), `"count"` (1 per layer; with a type selection this is DeepSpeed's
 * `type:REGEX`).
 */
export type CostSource = "params" | "flops" | "count";

const SOURCES: readonly CostSource[] = ["params", "flops", "count"];

function layersOf(model: Sequential | readonly Layer[]): readonly Layer[] {
  if (model instanceof Sequential) return model.layers;
  if (Array.isArray(model)) return model;
  throw new TypeError(
    `model must be a Sequential or an array of layers, got ${describeValue(model)}`,
  );
}

/** Input shape of every layer: the model input, then each layer's output. */
function inputShapes(layers: readonly Layer[], inputShape: Shape): Shape[] {
  const shapes: Shape[] = [];
  let s = inputShape;
  for (const l of layers) {
    shapes.push(s);
    s = l.outputShape(s);
  }
  return shapes;
}

/**
 * Static costs of each layer of `model` for an input of `inputShape`.
 * Throws a RangeError for an unknown source or shapes the layers refuse.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, ReLU, Sequential } from "@conveyor/core";
 * import { layerCosts } from "@conveyor/core/analysis";
 * const be = new CpuBackend();
 * const model = new Sequential([new Linear(be, 4, 8), new ReLU(be), new Linear(be, 8, 2)]);
 * console.log(layerCosts(model, [16, 4], "params"));
 * // [{ kind: "Linear", cost: 40 }, { kind: "ReLU", cost: 0 }, { kind: "Linear", cost: 18 }]
 * model.dispose();
 * ```
 */
export function layerCosts(
  model: Sequential | readonly Layer[],
  inputShape: Shape,
  source: CostSource,
): CostedLayer[] {
  if (!SOURCES.includes(source)) {
    throw new RangeError(
      `cost source must be "params", "flops" or "count" (or use profileLayerCosts), got ${
        JSON.stringify(source) ?? String(source)
      }`,
    );
  }
  const layers = layersOf(model);
  const shapes = inputShapes(layers, inputShape);
  return layers.map((l, i) => {
    if (source === "count") return { kind: l.kind, cost: 1 };
    const c = l.cost(shapes[i]);
    return { kind: l.kind, cost: source === "params" ? c.params : c.flops };
  });
}

/** Options of {@linkcode profileLayerCosts}. */
export interface ProfileOptions {
  /** Timed repetitions per layer; the median is reported. Integer ≥ 1, default 3. */
  readonly repeats?: number;
  /** Untimed runs per layer first (compilation, caches). Integer ≥ 0, default 1. */
  readonly warmup?: number;
}

/**
 * Measured costs: the median time in milliseconds of each layer's forward
 * plus full backward (B and W) on the layers' backend, fed with the real
 * activations that reach it from `input`. The pass runs under a private key
 * and restores every parameter gradient afterwards, so the model is left as
 * it was (bitwise on the CPU backend). For F, I and W apart (and each
 * layer's optimizer step), see `profileLayerPasses`.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear, ReLU, Sequential } from "@conveyor/core";
 * import { profileLayerCosts } from "@conveyor/core/analysis";
 * const be = new CpuBackend();
 * const model = new Sequential([new Linear(be, 4, 8), new ReLU(be)]);
 * const x = be.zeros([16, 4]);
 * const costs = await profileLayerCosts(model, x, { repeats: 1 });
 * console.log(costs.map((c) => c.kind)); // ["Linear", "ReLU"]
 * x.dispose();
 * model.dispose();
 * ```
 */
export async function profileLayerCosts(
  model: Sequential | readonly Layer[],
  input: Tensor,
  options: ProfileOptions = {},
): Promise<CostedLayer[]> {
  const repeats = options.repeats ?? 3;
  const warmup = options.warmup ?? 1;
  if (!Number.isInteger(repeats) || repeats < 1) {
    throw new RangeError(`repeats must be an integer >= 1, got ${describeValue(repeats)}`);
  }
  if (!Number.isInteger(warmup) || warmup < 0) {
    throw new RangeError(`warmup must be an integer >= 0, got ${describeValue(warmup)}`);
  }
  const layers = layersOf(model);
  inputShapes(layers, input.shape); // refuse bad shapes before any work
  const backend = input.backend;
  const key = "__conveyor_profile__";

  // Gradients are restored at the end: profiling must not change training.
  const saved = layers.flatMap((l) => l.parameters()).map((p) => ({ p, g: ops.copy(p.grad) }));
  const inputs: Tensor[] = [];
  const out: CostedLayer[] = [];
  try {
    let h = input;
    for (const l of layers) {
      inputs.push(h);
      h = l.forward(h, { save: false });
    }
    if (h !== input) h.dispose();
    for (let i = 0; i < layers.length; i++) {
      const l = layers[i];
      const times: number[] = [];
      for (let r = 0; r < warmup + repeats; r++) {
        await backend.sync();
        const t0 = performance.now();
        const y = l.forward(inputs[i], { key });
        const dy = ops.scale(y, 0.5); // any dy of the right shape; values barely matter
        y.dispose();
        const dx = l.backward(dy, key);
        dy.dispose();
        dx.dispose();
        await backend.sync();
        if (r >= warmup) times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      out.push({ kind: l.kind, cost: times[Math.floor(times.length / 2)] });
    }
  } finally {
    for (const l of layers) l.dropState(key);
    for (let i = 1; i < inputs.length; i++) inputs[i].dispose();
    for (const { p, g } of saved) {
      ops.copyInPlace(p.grad, g);
      g.dispose();
    }
  }
  return out;
}
