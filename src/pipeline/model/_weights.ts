/**
 * The whole model's weights gathered from its ranks: as one safetensors
 * file in the model's parameter order, or as sums for a quick comparison.
 *
 * @module
 */

import { CpuBackend } from "../../tensor/cpu/backend.ts";
import type { Parameter } from "../../nn/layer.ts";
import {
  parseSafetensors,
  saveSafetensors,
  type SaveSafetensorsOptions,
} from "../../nn/safetensors.ts";
import type { RankGroup } from "../runtime/rank_group.ts";
import type { ModelStageCalls } from "./stage_calls.ts";
import type { ModelParameter } from "./checkpoint_file.ts";
import type { ParameterStats } from "./results.ts";
import { callReplicasAgreeing } from "./_every_rank.ts";

/** Every rank's parameters by name. */
export async function gatherWeights(
  group: RankGroup<ModelStageCalls>,
): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const bytes of await callReplicasAgreeing(group, "save")) {
    for (const [name, e] of parseSafetensors(bytes).tensors) out.set(name, e.data);
  }
  return out;
}

/** `tensors` as the single-device model's safetensors file (`params` order). */
export async function weightsFile(
  params: readonly ModelParameter[],
  tensors: Map<string, Float32Array>,
  opts: SaveSafetensorsOptions | undefined,
): Promise<Uint8Array> {
  const be = new CpuBackend();
  const list: Parameter[] = params.map(({ name, shape }) => {
    const value = be.fromData(tensors.get(name)!, [...shape]);
    return { name, value, grad: value };
  });
  try {
    return await saveSafetensors(list, opts);
  } finally {
    for (const p of list) p.value.dispose();
  }
}

/** Sum and sum of squares (f64) of `tensors`, in `params` order. */
export function weightStats(
  params: readonly ModelParameter[],
  tensors: Map<string, Float32Array>,
): ParameterStats {
  let sum = 0, sumSq = 0, count = 0;
  for (const { name } of params) {
    const d = tensors.get(name)!;
    for (let i = 0; i < d.length; i++) {
      sum += d[i];
      sumSq += d[i] * d[i];
    }
    count += d.length;
  }
  return { sum, sumSq, count };
}
