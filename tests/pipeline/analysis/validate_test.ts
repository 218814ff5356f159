import assert from "node:assert/strict";
import {
  checkSchedule,
  ScheduleDeadlockError,
  validateSchedule,
} from "../../../src/pipeline/analysis/validate.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import type { Action, ActionKind } from "../../../src/pipeline/schedule/action.ts";
import type { Schedule } from "../../../src/pipeline/schedule/schedule.ts";

const a = (kind: ActionKind, stage: number, microBatch: number): Action => ({
  kind,
  stage,
  microBatch,
});

function thrown(fn: () => void): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error("expected a throw");
}

function custom(ranks: number, m: number, actions: Action[][]): Schedule {
  return {
    name: "custom",
    ranks,
    microBatches: m,
    stagesPerRank: 1,
    stageToRank: Array.from({ length: ranks }, (_, s) => s),
    actions,
  };
}

Deno.test("validateSchedule: a hand-made deadlocking list is refused with each stalled rank named", () => {
  // Rank 0 runs 0F0, then waits in 0B0 for 1B0; rank 1 starts with 1F1,
  // which waits for 0F1 (queued behind 0B0 on rank 0): a cycle.
  const s = custom(2, 2, [
    [a("F", 0, 0), a("B", 0, 0), a("F", 0, 1), a("B", 0, 1)],
    [a("F", 1, 1), a("B", 1, 1), a("F", 1, 0), a("B", 1, 0)],
  ]);
  const e = thrown(() => validateSchedule(s));
  {
    assert.ok(e instanceof ScheduleDeadlockError);
    assert.equal(e.rank, 0);
    assert.deepEqual(e.action, a("B", 0, 0));
    assert.equal(e.stalls.length, 2);
    assert.deepEqual(e.stalls[0], {
      rank: 0,
      index: 1,
      action: a("B", 0, 0),
      waitingFor: a("B", 1, 0),
      waitingForRank: 1,
    });
    assert.deepEqual(e.stalls[1], {
      rank: 1,
      index: 0,
      action: a("F", 1, 1),
      waitingFor: a("F", 0, 1),
      waitingForRank: 0,
    });
    assert.match(e.message, /rank 0 stalls at 0B0 \(position 1\), waiting for 1B0 on rank 1/);
    assert.match(e.message, /rank 1 stalls at 1F1 \(position 0\), waiting for 0F1 on rank 0/);
  }
  const problems = checkSchedule(s);
  assert.deepEqual(problems.map((p) => [p.kind, p.rank]), [["deadlock", 0], ["deadlock", 1]]);
});

Deno.test("validateSchedule: order problems inside one rank stall on the same rank", () => {
  // W before its I.
  const wFirst = custom(1, 1, [[a("F", 0, 0), a("W", 0, 0), a("I", 0, 0)]]);
  const e1 = thrown(() => validateSchedule(wFirst));
  assert.ok(e1 instanceof ScheduleDeadlockError);
  assert.deepEqual(e1.stalls[0].waitingFor, a("I", 0, 0));
  assert.match(e1.message, /waiting for 0I0 later on the same rank/);
  // Backward before its own forward.
  const bFirst = custom(1, 1, [[a("B", 0, 0), a("F", 0, 0)]]);
  assert.throws(
    () => validateSchedule(bFirst),
    /stalls at 0B0 .* waiting for 0F0 later on the same rank/,
  );
  // Forward of stage 1 before stage 0's forward, both on rank 0 of a V placement.
  const v: Schedule = {
    name: "custom",
    ranks: 1,
    microBatches: 1,
    stagesPerRank: 2,
    stageToRank: [0, 0],
    actions: [[a("F", 1, 0), a("F", 0, 0), a("B", 1, 0), a("B", 0, 0)]],
  };
  assert.throws(
    () => validateSchedule(v),
    /stalls at 1F0 .* waiting for 0F0 later on the same rank/,
  );
});

Deno.test("checkSchedule: structure problems are listed with their kind", () => {
  const good = generateSchedule("zb-h1", { ranks: 2, microBatches: 2 });
  assert.deepEqual(checkSchedule(good), []);
  const kinds = (s: Schedule) => checkSchedule(s).map((p) => p.kind);
  const edit = (fn: (lists: Action[][]) => void): Schedule => {
    const lists = good.actions.map((l) => [...l]);
    fn(lists);
    return { ...good, actions: lists };
  };
  assert.deepEqual(kinds(edit((l) => l[0].splice(0, 1))), ["missing"]); // 0F0 gone
  assert.deepEqual(kinds(edit((l) => l[0].push(a("F", 0, 0)))), ["duplicate"]);
  assert.deepEqual(kinds(edit((l) => l[0].push(a("F", 2, 0)))), ["range"]);
  assert.deepEqual(kinds(edit((l) => l[0].push(a("F", 0, 2)))), ["range"]);
  assert.deepEqual(kinds(edit((l) => l[0].push(a("F", 0, 0.5)))), ["range"]);
  assert.deepEqual(kinds(edit((l) => l[0].push(a("F", 1, 0)))), ["placement"]);
  assert.deepEqual(kinds(edit((l) => l[1].push(a("B", 1, 0)))), ["mixed-backward"]);
  assert.deepEqual(
    kinds(edit((l) => (l[1] = l[1].filter((x) => !(x.kind === "W" && x.microBatch === 1))))),
    ["missing"],
  );
  assert.deepEqual(
    kinds(edit((l) => l[0].push({ kind: "X", stage: 0, microBatch: 0 } as unknown as Action))),
    ["type"],
  );
  assert.deepEqual(kinds({ ...good, stageToRank: [0] }), ["range"]);
  assert.deepEqual(kinds({ ...good, stageToRank: [0, 2] }), ["range"]);
  assert.deepEqual(kinds({ ...good, stageToRank: [0, 0] }), ["placement", "placement"]);
  assert.deepEqual(kinds({ ...good, actions: [good.actions[0]] }), ["range"]);
  assert.deepEqual(kinds({ ...good, microBatches: 0 }), ["range"]);
  const missing = checkSchedule(edit((l) => l[0].splice(0, 1)));
  assert.match(missing[0].message, /0F0 is missing \(rank 0\)/);
});

Deno.test("validateSchedule: error classes and messages name the values", () => {
  const good = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  validateSchedule(good);
  assert.throws(
    () =>
      validateSchedule({ ...good, actions: [[...good.actions[0], a("F", 0, 5)], good.actions[1]] }),
    (e: unknown) =>
      e instanceof RangeError && /microBatch must be an integer in 0\.\.1, got 5/.test(e.message),
  );
  assert.throws(
    () =>
      validateSchedule({
        ...good,
        actions: [[...good.actions[0], null as unknown as Action], good.actions[1]],
      }),
    TypeError,
  );
  assert.throws(() => validateSchedule(null as unknown as Schedule), TypeError);
  // More than three problems: the message says how many more.
  const empty = { ...good, actions: [[], []] };
  assert.throws(() => validateSchedule(empty), /and 5 more/);
});
