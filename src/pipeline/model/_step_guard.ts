// The model stage's side of step post-validation (runtime/_verdicts.ts has
// the protocol): before a stage steps, its optimizer's parameters and state
// (and, with clipping, its gradients) are copied on the device and the
// stage's own check starts (are its gradients and, on the last stage, its
// losses finite? what is its sum of squared gradients?); the verdict of
// every stage later commits the step (the copies go), rolls it back (the
// copy is put back, bit for bit) or redoes it clipped (put back, then a
// step on the saved gradients scaled). Not exported from the package.

import type { Parameter } from "../../nn/layer.ts";
import type { OptimizerBase, OptimizerSnapshot } from "../../nn/optimizer_base.ts";
import { gradNormSquared, scaleGradsInPlace } from "../../nn/clip_grad_norm.ts";
import * as ops from "../../tensor/ops.ts";
import type { Tensor } from "../../tensor/mod.ts";
import { keep } from "../../tensor/tidy.ts";
import type { StepCheck } from "../runtime/rank_executor.ts";

/** Snapshots and checks of one rank's stages. */
export class StepGuard {
  readonly #snaps = new Map<number, OptimizerSnapshot>();
  readonly #grads = new Map<number, Tensor[]>();

  /**
   * Call right before `stage`'s optimizer steps: copies what the step will
   * change (and the gradients, when `keepGrads`, for a clipped redo) and
   * returns the stage's check, read back without blocking. Its gradient
   * sums are queued now, so they see the gradients the step uses.
   * `losses` (last stage): the iteration's micro-batch losses, in order.
   * `normParams`: the parameters the gradient norm counts (default all: a
   * tied copy held by another rank too counts once, there).
   */
  before(
    stage: number,
    optimizer: OptimizerBase,
    params: readonly Parameter[],
    losses: readonly Promise<number>[] | null,
    keepGrads = false,
    normParams: readonly Parameter[] = params,
  ): Promise<StepCheck> {
    this.#drop(stage);
    const normSq = gradNormSquared(normParams);
    this.#snaps.set(stage, optimizer.snapshot());
    if (keepGrads) this.#grads.set(stage, params.map((p) => keep(ops.copy(p.grad))));
    return (async (): Promise<StepCheck> => {
      const normSquared = await normSq;
      if (losses !== null) {
        const values = await Promise.all(losses);
        const bad = values.findIndex((v) => !Number.isFinite(v));
        if (bad >= 0) return { finite: false, what: "loss", microBatch: bad, normSquared };
      }
      return Number.isFinite(normSquared)
        ? { finite: true, normSquared }
        : { finite: false, what: "gradient", normSquared };
    })();
  }

  /** The step of `stage` is final: its copies go. */
  commit(stage: number): void {
    this.#drop(stage);
  }

  /** Undoes the step of `stage` exactly (no-op when it did not step). */
  rollback(stage: number, optimizer: OptimizerBase): void {
    const snap = this.#snaps.get(stage);
    if (snap !== undefined) optimizer.restore(snap);
    this.#drop(stage);
  }

  /**
   * Undoes the step of `stage` exactly, then steps again on the saved
   * gradients times `scale` (left in `params`' gradients); the copies go.
   */
  redo(stage: number, optimizer: OptimizerBase, params: readonly Parameter[], scale: number): void {
    const snap = this.#snaps.get(stage);
    const grads = this.#grads.get(stage);
    if (snap === undefined || grads === undefined || grads.length !== params.length) {
      throw new Error(
        `stage ${stage} has no step to redo clipped (saved gradients: ${grads?.length ?? "none"})`,
      );
    }
    try {
      optimizer.restore(snap);
      params.forEach((p, i) => ops.copyInPlace(p.grad, grads[i]));
      scaleGradsInPlace(params, scale);
      optimizer.step();
    } finally {
      this.#drop(stage);
    }
  }

  /** Bytes of the copies held now (parameters, optimizer state, gradients). */
  get heldBytes(): number {
    let n = 0;
    for (const snap of this.#snaps.values()) {
      for (const v of snap.values) n += v.bytes;
      for (const ss of snap.slots.values()) for (const t of ss) n += t.bytes;
    }
    for (const gs of this.#grads.values()) for (const g of gs) n += g.bytes;
    return n;
  }

  /** Releases every copy. */
  dispose(): void {
    for (const s of this.#snaps.values()) s.dispose();
    this.#snaps.clear();
    for (const gs of this.#grads.values()) for (const g of gs) g.dispose();
    this.#grads.clear();
  }

  #drop(stage: number): void {
    this.#snaps.get(stage)?.dispose();
    this.#snaps.delete(stage);
    for (const g of this.#grads.get(stage) ?? []) g.dispose();
    this.#grads.delete(stage);
  }
}
