// Structure checks of a schedule record, shared by the validator and the
// simulator. Not exported from the package.

import { type Action, formatAction } from "../schedule/action.ts";
import type { Schedule } from "../schedule/schedule.ts";
import type { ScheduleProblem } from "./schedule_problem.ts";
import { describeValue } from "../../text/describe.ts";

const KINDS = new Set(["F", "B", "I", "W"]);

function isPositiveInt(x: unknown): x is number {
  return typeof x === "number" && Number.isInteger(x) && x > 0;
}

/** Structure only (no dry run); problems in a fixed order. */
export function checkStructure(s: Schedule): ScheduleProblem[] {
  const out: ScheduleProblem[] = [];
  if (s === null || typeof s !== "object") {
    return [{ kind: "type", message: `schedule must be an object, got ${describeValue(s)}` }];
  }
  for (const key of ["ranks", "microBatches", "stagesPerRank"] as const) {
    if (!isPositiveInt(s[key])) {
      out.push({
        kind: "range",
        message: `${key} must be a positive integer, got ${describeValue(s[key])}`,
      });
    }
  }
  if (out.length > 0) return out;
  const { ranks, microBatches: m, stagesPerRank: V } = s;
  const S = ranks * V;
  if (!Array.isArray(s.stageToRank) || s.stageToRank.length !== S) {
    return [{
      kind: "range",
      message: `stageToRank must list one rank for each of the ${S} stages (ranks ${ranks} × ` +
        `stagesPerRank ${V}), got ${
          Array.isArray(s.stageToRank) ? `length ${s.stageToRank.length}` : typeof s.stageToRank
        }`,
    }];
  }
  const held = new Array<number>(ranks).fill(0);
  s.stageToRank.forEach((r, stage) => {
    if (!Number.isInteger(r) || r < 0 || r >= ranks) {
      out.push({
        kind: "range",
        message: `stageToRank[${stage}] must be a rank in 0..${ranks - 1}, got ${describeValue(r)}`,
      });
    } else held[r]++;
  });
  if (out.length > 0) return out;
  held.forEach((n, r) => {
    if (n !== V) {
      out.push({
        kind: "placement",
        rank: r,
        message: `rank ${r} must hold stagesPerRank ${V} stages, stageToRank gives it ${n}`,
      });
    }
  });
  // Placement is broken: the actions cannot be judged against it.
  if (out.length > 0) return out;
  if (!Array.isArray(s.actions) || s.actions.length !== ranks) {
    out.push({
      kind: "range",
      message: `actions must hold one list per rank (${ranks}), got ${
        Array.isArray(s.actions) ? `${s.actions.length} lists` : typeof s.actions
      }`,
    });
    return out;
  }
  // Counts per (stage, micro-batch) of F, B, I, W.
  const count = {
    F: new Int32Array(S * m),
    B: new Int32Array(S * m),
    I: new Int32Array(S * m),
    W: new Int32Array(S * m),
  };
  s.actions.forEach((list, r) => {
    if (!Array.isArray(list)) {
      out.push({
        kind: "type",
        rank: r,
        message: `actions[${r}] must be an array, got ${typeof list}`,
      });
      return;
    }
    list.forEach((a: Action, i) => {
      if (a === null || typeof a !== "object" || !KINDS.has(a.kind)) {
        out.push({
          kind: "type",
          rank: r,
          index: i,
          message:
            `actions[${r}][${i}] must be an action { kind: F|B|I|W, stage, microBatch }, got ${
              JSON.stringify(a)
            }`,
        });
        return;
      }
      const text = `actions[${r}][${i}] (${a.kind} stage ${a.stage} micro-batch ${a.microBatch})`;
      // A problem of this action (the first one ends its checks).
      const problem = (kind: "range" | "placement", message: string): void =>
        void out.push({ kind, rank: r, index: i, action: a, message });
      if (!Number.isInteger(a.stage) || a.stage < 0 || a.stage >= S) {
        return problem(
          "range",
          `${text}: stage must be an integer in 0..${S - 1}, got ${describeValue(a.stage)}`,
        );
      }
      if (!Number.isInteger(a.microBatch) || a.microBatch < 0 || a.microBatch >= m) {
        return problem(
          "range",
          `${text}: microBatch must be an integer in 0..${m - 1}, got ${
            describeValue(a.microBatch)
          }`,
        );
      }
      if (s.stageToRank[a.stage] !== r) {
        return problem(
          "placement",
          `${formatAction(a)} is on rank ${r}, but stage ${a.stage} is held by rank ${
            s.stageToRank[a.stage]
          }`,
        );
      }
      count[a.kind][a.stage * m + a.microBatch]++;
    });
  });
  if (out.length > 0) return out;
  for (let stage = 0; stage < S; stage++) {
    for (let mb = 0; mb < m; mb++) {
      const k = stage * m + mb;
      const r = s.stageToRank[stage];
      const name = (kind: string) => `${stage}${kind}${mb}`;
      const nF = count.F[k], nB = count.B[k], nI = count.I[k], nW = count.W[k];
      if (nF === 0) {
        out.push({ kind: "missing", rank: r, message: `${name("F")} is missing (rank ${r})` });
      }
      if (nF > 1) {
        out.push({ kind: "duplicate", rank: r, message: `${name("F")} appears ${nF} times` });
      }
      for (const [kind, n] of [["B", nB], ["I", nI], ["W", nW]] as const) {
        if (n > 1) {
          out.push({ kind: "duplicate", rank: r, message: `${name(kind)} appears ${n} times` });
        }
      }
      if (nB > 0 && nI + nW > 0) {
        out.push({
          kind: "mixed-backward",
          rank: r,
          message: `stage ${stage} micro-batch ${mb} has a full backward ${name("B")} and also ` +
            `split passes (I ${nI}, W ${nW}); use either B or I and W`,
        });
      } else if (nB === 0) {
        if (nI === 0 && nW === 0) {
          out.push({
            kind: "missing",
            rank: r,
            message: `${name("B")} (or ${name("I")} and ${name("W")}) is missing (rank ${r})`,
          });
        } else if (nI === 0) {
          out.push({
            kind: "missing",
            rank: r,
            message: `${name("I")} is missing: ${name("W")} needs it`,
          });
        } else if (nW === 0) {
          out.push({
            kind: "missing",
            rank: r,
            message: `${name("W")} is missing after ${name("I")}`,
          });
        }
      }
    }
  }
  return out;
}

/** The error `validateSchedule` throws for structure problems. */
export function structureError(problems: readonly ScheduleProblem[]): Error {
  const head = problems.slice(0, 3).map((p) => p.message).join("; ");
  const more = problems.length > 3 ? ` (and ${problems.length - 3} more)` : "";
  const msg = `invalid schedule: ${head}${more}`;
  return problems[0].kind === "type" ? new TypeError(msg) : new RangeError(msg);
}
