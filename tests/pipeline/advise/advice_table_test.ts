import assert from "node:assert/strict";
import {
  type AdviceCandidate,
  adviceJson,
  formatAdviceTable,
  formatBytes,
  rankCandidates,
} from "../../../src/pipeline/advise/advice_table.ts";

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
    /^\| # \| schedule \| P \| m \| V \| stages \(layers\) \| predicted ms \|/,
  );
  assert.match(plain[1], /^\|( :?-+:? \|)+$/);
  assert.equal(plain[0].split("|").length, plain[1].split("|").length);
  assert.equal(
    plain[2],
    "| 1 | zb-h1 | 2 | 8 | 1 | [0, 3, 6] | 123.5 | 12.5% | 1.68 KiB (1.00 KiB act), 2.68 KiB (2.00 KiB act) | yes |",
  );
  const verified = formatAdviceTable([
    cand("zb-h1", 100, [1, 1], true, { measuredMs: 110 }),
    cand("1f1b", 120, [1, 1]),
  ]).split("\n");
  assert.match(verified[0], /\| measured ms \| measured \/ predicted \|$/);
  assert.match(verified[2], /\| 110\.0 \| 1\.100 \|$/);
  assert.match(verified[3], /\| — \| — \|$/);
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
