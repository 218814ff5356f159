/**
 * Dropout with a deterministic, split-independent mask.
 *
 * @module
 */

import { checkLayerOptions } from "./_util.ts";
import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { LayerBase } from "./layer_base.ts";
import type { ForwardContext, LayerCost, LayerSpec } from "./layer.ts";
import { describeValue } from "../text/describe.ts";

/**
 * Options of {@linkcode Dropout}.
 *
 * @example
 * ```ts
 * import type { DropoutOptions } from "@conveyor/core";
 * const opts: DropoutOptions = { seed: 1234 };
 * console.log(opts.seed);
 * ```
 */
export interface DropoutOptions {
  /** Seed of the masks, an integer in [0, 2^32) (default 0). */
  readonly seed?: number;
}

/** @internal What the layer keeps between its passes: the mask's inputs, no tensor. */
interface DropoutState {
  training?: boolean;
  step?: number;
  rowOffset?: number;
}

/**
 * Dropout: while training (forward option `training: true`), each element
 * is dropped with probability `p` and kept elements are scaled by
 * `1 / (1 − p)`; otherwise (prediction, evaluation) the output is the input
 * (a view, no copy). The mask is a hash of the layer's `seed`, the forward's
 * `step` and each element's global index in the full batch (its row is
 * `rowOffset` plus its row in the micro-batch), computed alike on every
 * backend: a pipeline run that splits the batch into micro-batches on
 * several ranks drops exactly the elements a single-device run drops, and
 * the CPU and WebGPU masks agree bit for bit. A training forward needs
 * `step` (a new mask each step); the mask is recomputed, not stored, so I
 * needs no tensor from the forward. I is dropout of `dy` with the same
 * mask; W does nothing.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Dropout } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const drop = new Dropout(be, 0.5, { seed: 3 });
 * const x = ops.ones(be, [2, 4]);
 * const y = await drop.forward(x, { key: 0, training: true, step: 1 }).toArray();
 * assert.ok(y.every((v) => v === 0 || v === 2)); // dropped, or kept and scaled by 2
 * const dx = await drop.backward(ops.ones(be, [2, 4]), 0).toArray();
 * assert.deepEqual([...dx], [...y]); // the same mask in I
 * const evalY = await drop.forward(x, { save: false }).toArray();
 * assert.deepEqual([...evalY], new Array(8).fill(1)); // not training: identity
 * ```
 */
export class Dropout extends LayerBase<DropoutState> {
  /** Always `"Dropout"`. */
  readonly kind: string = "Dropout";
  /** Drop probability in [0, 1). */
  readonly p: number;
  /** Seed of the masks. */
  readonly seed: number;

  /** Creates the layer; `p` in [0, 1), `opts.seed` an integer in [0, 2^32). */
  constructor(backend: Backend, p: number, opts?: DropoutOptions) {
    super(backend);
    checkLayerOptions("Dropout", opts, ["seed"]);
    if (typeof p !== "number" || !(p >= 0 && p < 1)) {
      throw new RangeError(`Dropout: p must be a number in [0, 1), got ${describeValue(p)}`);
    }
    const seed = opts?.seed ?? 0;
    if (typeof seed !== "number" || !Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new RangeError(
        `Dropout: seed must be an integer in [0, 2^32), got ${describeValue(seed)}`,
      );
    }
    this.p = p;
    this.seed = seed;
  }

  /** The architecture for `layerFromSpec`. */
  override spec(): LayerSpec {
    return { kind: "Dropout", args: { p: this.p, seed: this.seed } };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    let n = 1;
    for (const d of s) n *= d;
    return { params: 0, flops: n };
  }

  #apply(t: Tensor, training: boolean, step: number, rowOffset: number): Tensor {
    if (!training || this.p === 0) return t.reshape(t.shape);
    return ops.dropout(t, { p: this.p, seed: this.seed, step, rowOffset });
  }

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    _key: unknown,
    save: boolean,
    ctx: ForwardContext,
  ): { y: Tensor; state?: DropoutState } {
    const { training, step, rowOffset } = ctx;
    if (training && step === undefined) {
      throw new TypeError(
        "Dropout: a training forward needs the step option (ForwardOptions.step), so the mask " +
          "changes from step to step; pass { training: true, step, rowOffset }",
      );
    }
    const y = this.#apply(x, training, step ?? 0, rowOffset); // [...]
    return save ? { y, state: { training, step: step ?? 0, rowOffset } } : { y };
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, s: DropoutState): Tensor {
    // dx = dy · mask / (1 − p), the forward's mask recomputed — [...]
    return this.#apply(dy, s.training!, s.step!, s.rowOffset!);
  }

  /** @ignore */
  protected backwardWeightImpl(): void {}
}
