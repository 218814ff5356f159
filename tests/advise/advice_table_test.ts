import assert from "node:assert/strict";
import {
  type AdviceCandidate,
  adviceJson,
  distinctRuns,
  formatAdviceTable,
  formatBytes,
  markTies,
  pipelineVerdict,
  rankCandidates,
} from "../../src/advise/advice_table.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../src/pipeline/schedule/generate.ts";

const mem = (activations: number) => ({
  activations,
  parameters: 100,
  gradients: 100,
  optimizerState: 200,
  stepCopies: 300,
  total: activations + 700,
});
const cand = (
  schedule: string,
  predictedMs: number,
  acts: number[],
  fits = true,
  extra: Partial<AdviceCandidate> = {},
): AdviceCandidate => ({
  schedule,
  ranks: acts.length,
  microBatches: 8,
  stagesPerRank: 1,
  boundaries: [0, 3, 6],
  predictedMs,
  bubble: 0.125,
  peakBytes: acts.map((a) => a + 700),
  memory: acts.map(mem),
  fits,
  ...extra,
});

Deno.test("rankCandidates: fitting first, then fastest, then fewest bytes, then by name", () => {
  const ranked = rankCandidates([
    cand("gpipe", 5, [9000, 9000], false),
    cand("zb-h2", 10, [3000, 3000]),
    cand("zb-h1", 10, [2000, 2000]),
    cand("1f1b", 12, [2000, 1000]),
    cand("a-tie", 10, [2000, 2000]),
  ]);
  assert.deepEqual(ranked.map((c) => c.schedule), ["a-tie", "zb-h1", "zb-h2", "1f1b", "gpipe"]);
  assert.throws(() => rankCandidates(null as unknown as AdviceCandidate[]), TypeError);
});

Deno.test("formatBytes: binary units, three significant digits", () => {
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.50 KiB");
  assert.equal(formatBytes(10 * 2 ** 20), "10.0 MiB");
  assert.equal(formatBytes(3 * 2 ** 30), "3.00 GiB");
});

Deno.test("formatAdviceTable: a Markdown table with a separator row; measured columns only when verified", () => {
  const plain = formatAdviceTable([cand("zb-h1", 123.456, [1024, 2048])]).split("\n");
  assert.equal(plain.length, 3);
  assert.match(
    plain[0],
    /^\| +# \| schedule \| +P \| +m \| +V \| stages \(layers\) \| predicted ms \|/,
  );
  assert.match(plain[1], /^\|( :?-+:? \|)+$/);
  assert.equal(plain[0].split("|").length, plain[1].split("|").length);
  assert.equal(
    plain[2],
    "|   1 | zb-h1    |   2 |   8 |   1 | [0, 3, 6]       |        123.5 |  12.5% | 1.68 KiB (1.00 KiB act), 2.68 KiB (2.00 KiB act) |  yes |",
  );
  // Aligned on a terminal: every line as long, the cells' bars at the same columns.
  assert.ok(plain.every((l) => l.length === plain[0].length), plain.join("\n"));
  const bars = (l: string) => [...l].flatMap((ch, i) => (ch === "|" ? [i] : []));
  assert.deepEqual(bars(plain[2]), bars(plain[0]));
  const verified = formatAdviceTable([
    cand("zb-h1", 100, [1, 1], true, { measuredMs: 110 }),
    cand("1f1b", 120, [1, 1]),
  ]).split("\n");
  assert.match(verified[0], /\| measured ms \| measured \/ predicted \|$/);
  assert.match(verified[2], /\| +110\.0 \| +1\.100 \|$/);
  assert.match(verified[3], /\| +— \| +— \|$/);
});

Deno.test("adviceJson: the contract's keys, peakBytes one number per rank, measured fields only when measured", () => {
  const j = adviceJson(cand("zb-v", 50, [10, 20]));
  assert.deepEqual(Object.keys(j), [
    "schedule",
    "ranks",
    "microBatches",
    "stagesPerRank",
    "boundaries",
    "predictedMs",
    "bubble",
    "peakBytes",
    "memory",
    "fits",
  ]);
  assert.deepEqual(j.peakBytes, [710, 720]);
  assert.deepEqual(j.memory[1], {
    activations: 20,
    parameters: 100,
    gradients: 100,
    optimizerState: 200,
    stepCopies: 300,
  });
  const m = adviceJson(
    cand("zb-v", 50, [10, 20], true, {
      measuredMs: 55,
      measuredBubble: 0.1,
      measuredActivationBytes: [11, 19],
    }),
  );
  assert.equal(m.measuredMs, 55);
  assert.deepEqual(m.measuredActivationBytes, [11, 19]);
  // Round-trips through JSON as is.
  assert.deepEqual(JSON.parse(JSON.stringify(m)), m);
});

Deno.test("distinctRuns: each distinct run once; at P = 1 gpipe and 1f1b are one run (seen: listed twice), as are zb-h1, zb-h2 and zb-auto; at P = 2 they stay apart", () => {
  const all = (ranks: number) =>
    SCHEDULE_NAMES.map((name) => {
      const generated = generateSchedule(name, { ranks, microBatches: 4 });
      const stages = generated.stageToRank.length;
      return cand(name, 10, Array(ranks).fill(100), true, {
        ranks,
        microBatches: 4,
        stagesPerRank: generated.stagesPerRank,
        boundaries: Array.from({ length: stages + 1 }, (_, i) => i),
        generated,
      });
    });
  const one = distinctRuns(all(1));
  assert.deepEqual(
    one.map((c) => [c.schedule, ...(c.sameRunAs ?? [])].join("=")),
    [
      "gpipe=1f1b",
      "interleaved-1f1b=looped-bfs",
      "zb-h1=zb-h2=zb-auto",
      "zb-v=v-half=v-min",
      "dualpipe-v",
    ],
  );
  const two = distinctRuns(all(2));
  assert.ok(two.some((c) => c.schedule === "gpipe") && two.some((c) => c.schedule === "1f1b"));
  assert.equal(two.find((c) => c.schedule === "gpipe")!.sameRunAs, undefined);
  // The fewest bytes stand for the run.
  const [g, o] = all(1);
  const folded = distinctRuns([{ ...g, peakBytes: [900] }, { ...o, peakBytes: [300] }]);
  assert.deepEqual(folded.map((c) => [c.schedule, c.sameRunAs]), [["1f1b", ["gpipe"]]]);
  // Candidates without their schedule are kept as they are.
  assert.equal(distinctRuns([cand("a", 1, [1]), cand("a", 1, [1])]).length, 2);
});

Deno.test("markTies: those within the first's spread are marked, the first too; none without spreads", () => {
  const c = (name: string, ms: number, spreadMs?: number) =>
    cand(name, ms, [1, 1], true, spreadMs === undefined ? {} : { spreadMs });
  const m = markTies([c("a", 10, 1), c("b", 11.5, 1), c("c", 12.5, 0.4)]);
  assert.deepEqual(m.map((x) => x.tied === true), [true, true, false]);
  assert.deepEqual(markTies([c("a", 10), c("b", 10.5)]).map((x) => x.tied === true), [
    false,
    false,
  ]);
  assert.deepEqual(markTies([]), []);
});

Deno.test("pipelineVerdict: one line when one rank beats the pipelines (seen: only --ranks 1,2 showed it), when it loses, and when they cannot be told apart", () => {
  const c = (name: string, ranks: number, ms: number, fits = true) =>
    cand(name, ms, Array(ranks).fill(1), fits, { spreadMs: 0.1 * ms });
  assert.equal(
    pipelineVerdict([c("zb-h1", 2, 7.1), c("1f1b", 1, 4.6), c("gpipe", 2, 9)]),
    "pipelining loses for this model: one rank takes 4.6 ms per step (1f1b), the fastest pipeline 7.1 ms (zb-h1 at P = 2)",
  );
  assert.match(
    pipelineVerdict([c("1f1b", 1, 20), c("zb-h1", 2, 11)])!,
    /^pipelining wins for this model \(1\.82× faster\): one rank takes 20\.0 ms/,
  );
  assert.match(
    pipelineVerdict([c("1f1b", 1, 10), c("zb-h1", 2, 10.5)])!,
    /^pipelining cannot be told from one rank for this model/,
  );
  // Only what fits counts.
  assert.match(pipelineVerdict([c("1f1b", 1, 1, false), c("zb-h1", 2, 5)]) ?? "none", /none/);
  assert.equal(pipelineVerdict([c("zb-h1", 2, 7.1)]), undefined);
});
