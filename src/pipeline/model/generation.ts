/**
 * Generation through a pipeline: each prompt is a micro-batch whose new
 * positions go through the stages in turn, each stage's forward on the rank
 * that owns it, with the key/value cache of its attention layers kept
 * there; the prompts' loops run interleaved, so while one prompt's token is
 * on stage 1 another's is on stage 0.
 *
 * @module
 */

import type { Sequential } from "../../nn/sequential.ts";
import {
  checkGeneration,
  type GenerationOptions,
  type GenerationResult,
  languageModelLimits,
  runGeneration,
} from "../../nn/generate.ts";
import { checkCachedForward } from "../../nn/kv_cache.ts";
import type { RankGroup } from "../runtime/rank_group.ts";
import type { ModelStageCalls, TensorData } from "./stage_calls.ts";
import { callEveryRank } from "./_every_rank.ts";

let sessions = 0;

/**
 * The forward of `data` (`shape`) through every stage in turn, each a
 * `predict` call to the rank `stageToRank` names (`rankOffset` added: a
 * replica's first rank), nothing kept: a prediction too small for a
 * pipeline run, and generation without the cache.
 */
export async function stageByStage(
  ranks: RankGroup<ModelStageCalls>,
  stageToRank: readonly number[],
  data: Float32Array,
  shape: readonly number[],
  rankOffset = 0,
): Promise<TensorData> {
  let cur: TensorData = { data, shape: [...shape] };
  for (let s = 0; s < stageToRank.length; s++) {
    cur = await ranks.call(rankOffset + stageToRank[s], "predict", { stage: s, ...cur });
  }
  return cur;
}

/**
 * Generates for `prompts` on `ranks` (stages placed by `stageToRank`;
 * `model` is the whole model, for its vocabulary and context, and to check
 * that its layers have a cached forward). With D replicas prompt `i` runs on
 * replica `i mod D`. Under MPI the prompts run one after another (every
 * process makes the same calls in the same order). Activations between
 * stages pass through this thread (`[1, T, C]` per prompt: one position's
 * width once the prompt is in). The caches are dropped at the end, on
 * success or failure.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, createTinyGPT, PipelineParallelModel } from "@conveyor/core";
 * import { generate } from "@conveyor/core/nn";
 * const gpt = createTinyGPT({ vocabSize: 12, seqLen: 16, dim: 8, heads: 2, layers: 2, seed: 1 }, new CpuBackend());
 * const want = await generate(gpt, [1, 2, 3], { maxTokens: 5, temperature: 0 });
 * await using model = await PipelineParallelModel.create({
 *   model: gpt, schedule: "1f1b", ranks: 2, microBatches: 2, loss: "cross-entropy", backend: "cpu",
 *   optimizer: { kind: "sgd", lr: 0.1 },
 * });
 * const got = await model.generate([1, 2, 3], { maxTokens: 5, temperature: 0 });
 * assert.deepEqual(got.ids, want.ids);
 * gpt.dispose();
 * ```
 */
export async function generateOnRanks(
  ranks: RankGroup<ModelStageCalls>,
  stageToRank: readonly number[],
  model: Sequential,
  prompts: readonly number[] | readonly (readonly number[])[],
  options: GenerationOptions,
): Promise<GenerationResult> {
  const checked = checkGeneration(prompts, options, languageModelLimits(model));
  const o = checked.options;
  if (o.cache) checkCachedForward(model);
  const session = ++sessions;
  const replicas = ranks.replicas ?? 1;
  const P = ranks.ranks / replicas;
  const last = stageToRank.length - 1;
  try {
    return await runGeneration(checked.prompts, o, async (i, fresh, seq) => {
      const offset = (i % replicas) * P;
      if (!o.cache) {
        const out = await stageByStage(
          ranks,
          stageToRank,
          Float32Array.from(seq),
          [1, seq.length],
          offset,
        );
        return out.data.slice(out.data.length - out.shape[out.shape.length - 1]);
      }
      let cur: TensorData = { data: Float32Array.from(fresh), shape: [1, fresh.length] };
      for (let s = 0; s <= last; s++) {
        cur = await ranks.call(offset + stageToRank[s], "decode", {
          stage: s,
          ...cur,
          session,
          slot: i,
          lastOnly: s === last,
        });
      }
      const v = cur.shape[cur.shape.length - 1];
      return cur.data.slice(cur.data.length - v);
    }, ranks.kind !== "mpi");
  } finally {
    if (o.cache && !ranks.closed) await callEveryRank(ranks, "endDecode", { session });
  }
}
