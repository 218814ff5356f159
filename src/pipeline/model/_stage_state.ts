// A rank's share of a training checkpoint: its stages' weights and optimizer
// state out (one safetensors file, tensors named as in the whole
// checkpoint), and its stages' share of a whole checkpoint in. Used by the
// model stage executor; not exported from the package.

import type { Parameter } from "../../nn/layer.ts";
import * as ops from "../../tensor/ops.ts";
import { encodeSafetensors, type SafetensorsTensor } from "../../nn/safetensors.ts";
import type { OptimizerBase, OptimizerState } from "../../nn/optimizer_base.ts";
import { parseTrainingCheckpoint } from "../../nn/training_checkpoint.ts";

/** One stage: its parameters and its optimizer. */
export interface StageState {
  readonly stage: number;
  readonly params: readonly Parameter[];
  readonly optimizer: OptimizerBase;
}

/**
 * The rank's share: `model.<name>` and `optim.<name>.<slot>` tensors, and
 * metadata `step` and (when set) `lr_override`, equal on every stage.
 */
export async function saveStageState(stages: readonly StageState[]): Promise<Uint8Array> {
  const states = await Promise.all(stages.map((s) => s.optimizer.saveState()));
  const datas = await Promise.all(
    stages.map((s) => Promise.all(s.params.map((p) => p.value.toArray()))),
  );
  const step = states[0]?.step ?? 0;
  const override = states[0]?.lrOverride ?? null;
  states.forEach((st, i) => {
    if (st.step !== step || st.lrOverride !== override) {
      throw new Error(
        `stage ${stages[i].stage} is at step ${st.step} (lr override ${st.lrOverride}), ` +
          `stage ${stages[0].stage} at ${step} (${override}): the stages disagree`,
      );
    }
  });
  const tensors: SafetensorsTensor[] = [];
  stages.forEach((s, i) =>
    s.params.forEach((p, k) =>
      tensors.push({ name: `model.${p.name}`, shape: p.value.shape, data: datas[i][k] })
    )
  );
  stages.forEach((s, i) => {
    for (const p of s.params) {
      const slots = states[i].slots.get(p.name);
      slots?.forEach((data, k) =>
        tensors.push({
          name: `optim.${p.name}.${s.optimizer.stateSlots[k]}`,
          shape: p.value.shape,
          data,
        })
      );
    }
  });
  return encodeSafetensors(tensors, {
    metadata: {
      step: String(step),
      ...(override === null ? {} : { lr_override: JSON.stringify(override) }),
    },
  });
}

/**
 * Loads the rank's stages from a whole training checkpoint (already
 * checked against the whole model by the caller, who also chose whether
 * non-finite values may load): checks the stages' share again (weights
 * present with their shapes, each optimizer's state) before writing
 * anything.
 */
export function loadStageState(stages: readonly StageState[], bytes: Uint8Array): void {
  const allow = { allowNonFinite: true };
  const ck = parseTrainingCheckpoint(bytes, allow);
  const states: OptimizerState[] = stages.map((s) => {
    const slots = new Map<string, readonly Float32Array[]>();
    for (const p of s.params) {
      const w = ck.weights.get(p.name);
      if (w === undefined || w.data.length !== p.value.size) {
        throw new RangeError(
          `checkpoint: tensor model.${p.name} of stage ${s.stage} is missing or of another size`,
        );
      }
      const st = ck.optimizerState.slots.get(p.name);
      if (st !== undefined) slots.set(p.name, st);
    }
    return { step: ck.optimizerStep, lrOverride: ck.lrOverride, slots };
  });
  stages.forEach((s, i) => s.optimizer.checkState(states[i], allow));
  // Checked: now write.
  stages.forEach((s, i) => {
    s.optimizer.loadState(states[i], allow);
    for (const p of s.params) {
      const t = p.value.backend.fromData(ck.weights.get(p.name)!.data, p.value.shape);
      ops.copyInPlace(p.value, t);
      t.dispose();
    }
  });
}
