// Tied embeddings across stages: where a `TiedHead` and the parameter it
// shares are on one rank, the rank ties them (one copy); where they are on
// two ranks, each holds a copy and the two copies' gradients are summed
// before either steps (`_tied_sync.ts`; the advisor counts the copies'
// bytes in src/advise/_tied_bytes.ts). Not exported from the package.

import type { Parameter } from "../../nn/layer.ts";
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
