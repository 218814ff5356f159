// Tied embeddings across stages: where a `TiedHead` and the parameter it
// shares are on one rank, the rank ties them (one copy); where they are on
// two ranks, each holds a copy and the two copies' gradients are summed
// before either steps (`_tied_sync.ts`). Not exported from the package.

import type { Parameter } from "../../nn/layer.ts";
import type { LayerBytes, RankMemory } from "../advise/rank_memory.ts";
import type { Sequential } from "../../nn/sequential.ts";
import { TiedHead } from "../../nn/tied_head.ts";
import type { Schedule } from "../schedule/schedule.ts";
import type { TiedLink } from "./stage_options.ts";

/**
 * The links of tied heads of `slices` (one per global stage) whose shared
 * parameter is on another rank, with the parameter itself; throws a
 * RangeError where one rank holds both but its list would step the owner
 * before the head's last backward.
 */
export function tiedLinks(
  slices: readonly Sequential[],
  schedule: Schedule,
): { link: TiedLink; param: Parameter }[] {
  const out: { link: TiedLink; param: Parameter }[] = [];
  slices.forEach((sl, hs) => {
    sl.layers.forEach((l, i) => {
      if (!(l instanceof TiedHead) || !l.tied) return; // an unbound head holds its own weight
      let param: Parameter | undefined;
      const os = slices.findIndex((o) => (param = o.parameters().find((p) => p.name === l.tiedTo)));
      if (os < 0 || os === hs || param === undefined) return;
      const hr = schedule.stageToRank[hs], or = schedule.stageToRank[os];
      if (hr !== or) {
        out.push({
          link: {
            name: l.tiedTo,
            ownerStage: os,
            ownerRank: or,
            headStage: hs,
            headRank: hr,
            headParam: `${sl.names[i]}.weight`,
          },
          param,
        });
        return;
      }
      const list = schedule.actions[hr];
      const last = (s: number) => list.findLastIndex((a) => a.kind !== "F" && a.stage === s);
      if (last(hs) > last(os)) {
        throw new RangeError(
          `tied embeddings: rank ${hr}'s list ends stage ${os}'s backward before stage ${hs}'s, ` +
            `so ${l.tiedTo} would step before the head's gradient is in`,
        );
      }
    });
  });
  return out;
}

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
