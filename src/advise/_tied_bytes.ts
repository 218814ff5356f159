// The advisor's bytes of tied embeddings across ranks: where a `TiedHead`
// and the table it shares sit on two ranks, each holds a copy (see
// src/pipeline/model/_tied_placement.ts), and summing their gradients
// needs a temporary of the table's size. Not exported from the package.

import type { Sequential } from "../nn/sequential.ts";
import { TiedHead } from "../nn/tied_head.ts";
import type { LayerBytes, RankMemory } from "./rank_memory.ts";

/**
 * `layers` (bytes per layer of `model`) with, for each tied head on another
 * rank than its table under `boundaries` and `stageToRank`, the bytes of
 * its copy: the table's parameters, and optimizer state and step copies in
 * the owner layer's proportions (the advisor's per-rank memory).
 */
export function withTiedCopies<L extends LayerBytes>(
  model: Sequential,
  layers: readonly L[],
  boundaries: readonly number[],
  stageToRank: readonly number[],
): LayerBytes[] {
  const stageOf = (i: number) => boundaries.findLastIndex((b) => b <= i);
  const out: LayerBytes[] = [...layers];
  model.layers.forEach((l, i) => {
    if (!(l instanceof TiedHead) || !l.tied) return; // an unbound head holds its own weight
    const owner = model.names.indexOf(l.tiedTo.slice(0, l.tiedTo.indexOf(".")));
    if (owner < 0 || stageToRank[stageOf(owner)] === stageToRank[stageOf(i)]) return;
    const o = layers[owner];
    const bytes = 4 * l.vocabSize * l.dim;
    const share = o.paramBytes === 0 ? 0 : bytes / o.paramBytes;
    out[i] = {
      paramBytes: bytes,
      optimizerStateBytes: (o.optimizerStateBytes ?? 0) * share,
      stepCopyBytes: (o.stepCopyBytes ?? 0) * share,
    };
  });
  return out;
}

/**
 * `memory` with, on each rank summing a tied copy with another rank's, the
 * sum's upload counted: a temporary of the table's bytes while the stage
 * steps, when nothing else of the iteration is held (activations at least
 * that much).
 */
export function withTiedSum(
  model: Sequential,
  memory: readonly RankMemory[],
  boundaries: readonly number[],
  stageToRank: readonly number[],
): RankMemory[] {
  const stageOf = (i: number) => boundaries.findLastIndex((b) => b <= i);
  const temp = memory.map(() => 0);
  model.layers.forEach((l, i) => {
    if (!(l instanceof TiedHead) || !l.tied) return; // an unbound head holds its own weight
    const owner = model.names.indexOf(l.tiedTo.slice(0, l.tiedTo.indexOf(".")));
    const ro = stageToRank[stageOf(owner)], rh = stageToRank[stageOf(i)];
    if (owner < 0 || ro === rh) return;
    for (const r of [ro, rh]) temp[r] = Math.max(temp[r], 4 * l.vocabSize * l.dim);
  });
  return memory.map((m, r) => {
    const activations = Math.max(m.activations, temp[r]);
    return { ...m, activations, total: m.total - m.activations + activations };
  });
}
