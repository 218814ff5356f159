// The model stage's side of step post-validation (runtime/_verdicts.ts has
// the protocol): before a stage steps, its optimizer's parameters and state
// are copied on the device and the stage's own check starts (are its
// gradients and, on the last stage, its losses finite?); the verdict of
// every stage later commits the step (the copy goes) or rolls it back (the
// copy is put back, bit for bit). Not exported from the package.

import type { Parameter } from "../../nn/layer.ts";
import type { OptimizerBase, OptimizerSnapshot } from "../../nn/optimizer_base.ts";
import { gradNormSquared } from "../../nn/clip_grad_norm.ts";
import type { StepCheck } from "../runtime/stage_executor.ts";

/** Snapshots and checks of one rank's stages. */
export class StepGuard {
  readonly #snaps = new Map<number, OptimizerSnapshot>();

  /**
   * Call right before `stage`'s optimizer steps: copies what the step will
   * change and returns the stage's check, read back without blocking. Its
   * gradient sums are queued now, so they see the gradients the step uses.
   * `losses` (last stage): the iteration's micro-batch losses, in order.
   */
  before(
    stage: number,
    optimizer: OptimizerBase,
    params: readonly Parameter[],
    losses: readonly Promise<number>[] | null,
  ): Promise<StepCheck> {
    this.#snaps.get(stage)?.dispose();
    const normSq = gradNormSquared(params);
    this.#snaps.set(stage, optimizer.snapshot());
    return (async (): Promise<StepCheck> => {
      if (losses !== null) {
        const values = await Promise.all(losses);
        const bad = values.findIndex((v) => !Number.isFinite(v));
        if (bad >= 0) return { finite: false, what: "loss", microBatch: bad };
      }
      return Number.isFinite(await normSq) ? { finite: true } : { finite: false, what: "gradient" };
    })();
  }

  /** The step of `stage` is final: its copy goes. */
  commit(stage: number): void {
    this.#snaps.get(stage)?.dispose();
    this.#snaps.delete(stage);
  }

  /** Undoes the step of `stage` exactly (no-op when it did not step). */
  rollback(stage: number, optimizer: OptimizerBase): void {
    const snap = this.#snaps.get(stage);
    if (snap === undefined) return;
    optimizer.restore(snap);
    snap.dispose();
    this.#snaps.delete(stage);
  }

  /** Releases every copy. */
  dispose(): void {
    for (const s of this.#snaps.values()) s.dispose();
    this.#snaps.clear();
  }
}
