import assert from "node:assert/strict";
import {
  createScheduleRegistry,
  type ScheduleDefinition,
} from "../../../src/pipeline/schedule/schedule_registry.ts";
import {
  generateSchedule,
  SCHEDULE_NAMES,
  SCHEDULES,
} from "../../../src/pipeline/schedule/generate.ts";
import { estimateBubbleFraction } from "../../../src/pipeline/analysis/bubble_estimate.ts";
import { checkSchedule } from "../../../src/pipeline/analysis/validate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { buildSchedule, readScheduleSpec, scheduleFlagsHelp } from "../../../src/cli/_options.ts";

// A contributor's schedule, as its own file would export it: GPipe's
// forwards, then the backwards newest micro-batch first.
const GPIPE_LIFO: ScheduleDefinition<"gpipe-lifo"> = {
  name: "gpipe-lifo",
  description: "all forwards, then all backwards newest first",
  defaultStagesPerRank: 1,
  checkShape: ({ stagesPerRank }) => {
    if (stagesPerRank !== 1) {
      throw new RangeError(
        `gpipe-lifo places one stage per rank, got stagesPerRank ${stagesPerRank}`,
      );
    }
  },
  generate: ({ ranks, microBatches }) => ({
    name: "gpipe-lifo",
    ranks,
    microBatches,
    stagesPerRank: 1,
    stageToRank: Array.from({ length: ranks }, (_, r) => r),
    actions: Array.from({ length: ranks }, (_, r) => [
      ...Array.from(
        { length: microBatches },
        (_, mb) => ({ kind: "F" as const, stage: r, microBatch: mb }),
      ),
      ...Array.from(
        { length: microBatches },
        (_, i) => ({ kind: "B" as const, stage: r, microBatch: microBatches - 1 - i }),
      ),
    ]),
  }),
  bubble: ({ ranks: p, microBatches: m, f, b }) => ((p - 1) * (f + b)) / ((m + p - 1) * (f + b)),
};

// The one line a contributor adds (here to a copy of the table, so the
// package's own registry is left as it is).
const registry = createScheduleRegistry([...SCHEDULES, GPIPE_LIFO]);

Deno.test("registry: a schedule added by one table line is named, generated and estimated", () => {
  assert.deepEqual(registry.names, [...SCHEDULE_NAMES, "gpipe-lifo"]);
  const s = registry.generate("gpipe-lifo", { ranks: 3, microBatches: 4 });
  checkSchedule(s);
  assert.equal(s.actions[0].at(-1)?.microBatch, 0, "backwards newest first");
  // Its bubble formula, with the largest per-stage cost of each kind.
  const est = registry.estimateBubble("gpipe-lifo", 3, 4, { F: [1, 2, 1], B: 2 });
  assert.equal(est, (2 * 4) / (6 * 4));
  // At equal costs the formula is the simulated bubble of the generated schedule.
  assert.ok(
    Math.abs(registry.estimateBubble("gpipe-lifo", 3, 4) - simulate(s).bubbleFraction) < 1e-12,
  );
  // Its stages-per-rank rule runs after the generic checks, before any work.
  assert.throws(
    () => registry.generate("gpipe-lifo", { ranks: 3, microBatches: 4, stagesPerRank: 2 }),
    /gpipe-lifo places one stage per rank, got stagesPerRank 2/,
  );
  assert.throws(
    () => registry.generate("gpipe-lifo", { ranks: 0, microBatches: 4 }),
    /ranks must be a positive integer, got 0/,
  );
  // The package's schedules are served as before.
  for (const name of SCHEDULE_NAMES) {
    assert.deepEqual(
      registry.generate(name, { ranks: 2, microBatches: 4 }),
      generateSchedule(name, { ranks: 2, microBatches: 4 }),
    );
  }
});

Deno.test("registry: the CLI's schedule flags list and build the added schedule", () => {
  assert.match(
    scheduleFlagsHelp(registry),
    /--schedule NAME {8}one of: .*dualpipe-v, v-half, v-min, gpipe-lifo/,
  );
  const spec = readScheduleSpec(
    { schedule: "gpipe-lifo", ranks: "2", microbatches: "3" },
    registry,
  );
  assert.deepEqual(
    buildSchedule(spec, registry),
    registry.generate("gpipe-lifo", { ranks: 2, microBatches: 3 }),
  );
  // The package's own table is untouched.
  assert.ok(!(SCHEDULE_NAMES as readonly string[]).includes("gpipe-lifo"));
  assert.doesNotMatch(scheduleFlagsHelp(), /gpipe-lifo/);
  assert.throws(() => generateSchedule("gpipe-lifo", { ranks: 2, microBatches: 2 }), TypeError);
  assert.throws(() => estimateBubbleFraction("gpipe-lifo", 2, 2), TypeError);
  assert.throws(
    () => readScheduleSpec({ schedule: "gpipe-lifo", ranks: "2", microbatches: "3" }),
    /--schedule must be one of/,
  );
});

Deno.test("registry: a name twice in a table, and an unknown name, are refused", () => {
  assert.throws(
    () => createScheduleRegistry([...SCHEDULES, SCHEDULES[0]]),
    /"gpipe" is in the table twice/,
  );
  assert.throws(
    () => registry.definition("zb-h3"),
    /unknown schedule "zb-h3"; valid names: gpipe, .*gpipe-lifo/,
  );
});

// Code with comments (and so JSDoc examples) removed.
async function code(path: string): Promise<string> {
  const text = await Deno.readTextFile(new URL(`../../../${path}`, import.meta.url));
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

Deno.test("registry: a schedule's name lives in its own file; the table holds one line per schedule", async () => {
  const table = await code("src/pipeline/schedule/generate.ts");
  for (const d of SCHEDULES) {
    const file = d.name === "1f1b"
      ? "one_f_one_b.ts"
      : d.name === "interleaved-1f1b"
      ? "interleaved_one_f_one_b.ts"
      : `${d.name.replaceAll("-", "_")}.ts`;
    // Named in code (as a string) in its file, not in the table, the estimates or the CLI.
    assert.match(await code(`src/pipeline/schedule/${file}`), new RegExp(`"${d.name}"`));
    for (
      const other of [
        "src/pipeline/schedule/generate.ts",
        "src/pipeline/schedule/schedule_registry.ts",
        "src/pipeline/analysis/bubble_estimate.ts",
        "src/cli/_options.ts",
        "src/cli/schedule.ts",
        "src/cli/simulate.ts",
        "src/cli/train.ts",
        "src/cli/advise.ts",
      ]
    ) {
      assert.doesNotMatch(
        await code(other),
        new RegExp(`["'\`]${d.name}["'\`]`),
        `${d.name} in ${other}`,
      );
    }
  }
  // One line of the table per schedule: its definition's identifier, alone on the line.
  const body = /export const SCHEDULES = \[([\s\S]*?)\] as const;/.exec(table)?.[1] ?? "";
  const lines = body.split("\n").map((l) => l.trim()).filter((l) => l !== "");
  assert.equal(lines.length, SCHEDULES.length);
  for (const l of lines) assert.match(l, /^[A-Z0-9_]+,$/);
});
