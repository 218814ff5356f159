// Tied embeddings across stages: a `TiedHead` and the parameter it shares
// must sit on one rank, whose list runs the head's stage's last backward
// before the owner's (so the owner steps on both gradients summed). Not
// exported from the package.

import type { Sequential } from "../../nn/sequential.ts";
import { TiedHead } from "../../nn/tied_head.ts";
import type { Schedule } from "../schedule/schedule.ts";

/**
 * Throws a RangeError, before any rank starts, where a tied head of
 * `slices` (one per global stage) and the stage holding its parameter are
 * on different ranks, or the rank's list would step the owner first.
 */
export function checkTiedPlacement(
  slices: readonly Sequential[],
  schedule: Schedule,
  scheduleName: string,
): void {
  slices.forEach((sl, hs) => {
    sl.layers.forEach((l, i) => {
      if (!(l instanceof TiedHead)) return;
      const os = slices.findIndex((o) => o.parameters().some((p) => p.name === l.tiedTo));
      if (os < 0 || os === hs) return;
      const hr = schedule.stageToRank[hs], or = schedule.stageToRank[os];
      if (hr !== or) {
        throw new RangeError(
          `tied embeddings: the head (layer ${sl.names[i]}, stage ${hs}) is on rank ${hr} but ` +
            `${l.tiedTo} (stage ${os}) on rank ${or} under ${scheduleName}; tied weights need ` +
            `both on one rank: use a schedule that places the first and last stage together ` +
            `("zb-v", "dualpipe-v") or ranks 1, or untie the embeddings`,
        );
      }
      const list = schedule.actions[hr];
      const last = (s: number) => list.findLastIndex((a) => a.kind !== "F" && a.stage === s);
      if (last(hs) > last(os)) {
        throw new RangeError(
          `tied embeddings: rank ${hr}'s list ends stage ${os}'s backward before stage ${hs}'s, ` +
            `so ${l.tiedTo} would step before the head's gradient is in; use "zb-v" or "dualpipe-v"`,
        );
      }
    });
  });
}
