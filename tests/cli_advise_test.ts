import assert from "node:assert/strict";
import { cli } from "./_cli.ts";

const QUICK = ["--repeats", "1", "--warmup", "0"];
const CONTRACT = ["schedule", "ranks", "microBatches", "predictedMs", "peakBytes"];

function lines(out: string): Record<string, unknown>[] {
  return out.trim().split("\n").map((l) => JSON.parse(l));
}

Deno.test("cli advise --json: one line per candidate, best first, with the contract's keys", async () => {
  const r = await cli(
    "advise",
    "--schedule",
    "gpipe,1f1b,zb-h1,zb-v",
    "--ranks",
    "2",
    "--microbatches",
    "2,4",
    ...QUICK,
    "--json",
  );
  assert.equal(r.code, 0, r.err);
  const rows = lines(r.out);
  assert.equal(rows.length, 8); // 4 schedules × 2 micro-batch counts
  for (const row of rows) {
    for (const k of CONTRACT) assert.ok(k in row, `missing ${k}`);
    const peak = row.peakBytes as number[];
    assert.equal(peak.length, row.ranks);
    assert.ok(peak.every((b) => Number.isFinite(b) && b > 0));
    // Each rank's bytes are the sum of what holds them.
    const mem = row.memory as Record<string, number>[];
    mem.forEach((m, i) =>
      assert.equal(
        peak[i],
        m.activations + m.parameters + m.gradients + m.optimizerState + m.stepCopies,
      )
    );
    assert.equal(row.fits, true);
    assert.ok(!("measuredMs" in row));
    // Calibrated by default: the profile-only prediction and the fit beside it.
    assert.ok(typeof row.uncalibratedMs === "number" && row.uncalibratedMs > 0);
    const cal = row.calibration as Record<string, unknown>;
    const f = cal.factors as Record<string, number>;
    for (const k of ["F", "I", "W", "B"]) assert.ok(f[k] > 0, `factor ${k}: ${f[k]}`);
    for (const k of ["actionMs", "handOverMs", "stepMs"]) {
      assert.ok((cal[k] as number) >= 0, `${k}: ${cal[k]}`);
    }
  }
  const ms = rows.map((x) => x.predictedMs as number);
  assert.deepEqual(ms, [...ms].sort((a, b) => a - b), "best first");
  assert.deepEqual(
    new Set(rows.map((x) => `${x.schedule}/${x.microBatches}`)).size,
    8,
  );
  // Progress goes to stderr, never into the JSON lines.
  assert.match(r.err, /advise: profiling/);
});

Deno.test("cli advise: a Markdown table that renders and lines up on a terminal; 1 and 2 ranks by default, with one line on whether pipelining pays and each prediction's spread", async () => {
  const r = await cli("advise", "--schedule", "1f1b,zb-h1", "--microbatches", "4", ...QUICK);
  assert.equal(r.code, 0, r.err);
  const table = r.out.split("\n").filter((l) => l.startsWith("|"));
  assert.equal(table.length, 6); // 1f1b and zb-h1 at P = 1 and at P = 2
  assert.match(table[1], /^\|( :?-+:? \|)+$/);
  const cols = table[0].split("|").length;
  assert.ok(table.every((l) => l.split("|").length === cols));
  // Aligned: every line as long (it was raw Markdown, ragged on a terminal).
  assert.ok(table.every((l) => l.length === table[0].length), table.join("\n"));
  const rows = table.slice(2).map((l) => l.split("|").map((c) => c.trim()));
  assert.deepEqual(rows.map((c) => c[3]).sort(), ["1", "1", "2", "2"]);
  for (const c of rows) assert.match(c[7], /^\d+\.\d ± \d+\.\d$/);
  assert.match(
    r.out,
    /\npipelining (loses|wins|cannot be told from one rank) for this model.*: one rank takes [\d.]+ ms per step \((1f1b|zb-h1)\), the fastest pipeline [\d.]+ ms \((1f1b|zb-h1) at P = 2\)\n/,
  );
  // The table is set off by a blank line from the text above it.
  const text = r.out.split("\n");
  assert.equal(text[text.indexOf(table[0]) - 1], "");
  assert.match(r.out, /tiny GPT: 2 blocks, dim 16/);
  assert.match(r.out, /median of \d+ sweeps, interquartile spread \d+%/);
  // Samples: 4 micro-batches × 2 stages × 3 measured steps per run; F from both runs.
  assert.match(
    r.out,
    /calibration at P = 2, m = 4 \(real runs, [\d.]+ s\): measured \/ profiled F ×[\d.]+ \(spread \d+%, 48\), I ×[\d.]+ \(spread \d+%, 24\), .*; 1f1b measured [\d.]+ ms, predicted [\d.]+ \(profile only [\d.]+\)/,
  );
  const s = await cli(
    "advise",
    "--schedule",
    "zb-h1",
    "--ranks",
    "2",
    "--microbatches",
    "4",
    "--summary",
    ...QUICK,
  );
  assert.equal(s.code, 0, s.err);
  assert.match(s.out, /zb-h1 at P = 2, m = 4:\n_+\nLayer \(type\)/);
  assert.match(s.out, /stage 1 \(rank 1\)/);
});

Deno.test("cli advise --no-calibrate: the profile-only prediction, the contract's keys and no more", async () => {
  const args = [
    "advise",
    "--schedule",
    "1f1b,zb-h1",
    "--ranks",
    "2",
    "--microbatches",
    "4",
    ...QUICK,
  ];
  const r = await cli(...args, "--no-calibrate", "--json");
  assert.equal(r.code, 0, r.err);
  const rows = lines(r.out);
  assert.equal(rows.length, 2);
  for (const row of rows) {
    for (const k of CONTRACT) assert.ok(k in row, `missing ${k}`);
    assert.ok(!("uncalibratedMs" in row) && !("calibration" in row));
  }
  assert.doesNotMatch(r.err, /calibrating/);
  const t = await cli(...args, "--no-calibrate");
  assert.equal(t.code, 0, t.err);
  assert.doesNotMatch(t.out, /calibration at/);
});

Deno.test("cli advise --rank-memory: candidates over the limit are marked and ranked last", async () => {
  const r = await cli(
    "advise",
    "--schedule",
    "gpipe,1f1b",
    "--microbatches",
    "8",
    "--rank-memory",
    "1KiB",
    ...QUICK,
    "--json",
  );
  assert.equal(r.code, 0, r.err);
  assert.ok(lines(r.out).every((x) => x.fits === false));
  const roomy = await cli(
    "advise",
    "--schedule",
    "gpipe",
    "--rank-memory",
    "2GiB",
    ...QUICK,
    "--json",
  );
  assert.ok(lines(roomy.out).every((x) => x.fits === true));
});

Deno.test("cli advise --shard-optimizer 2: half the optimizer state per rank in the byte table", async () => {
  const run = async (...extra: string[]) => {
    const r = await cli(
      "advise",
      "--schedule",
      "1f1b",
      "--ranks",
      "2",
      "--microbatches",
      "4",
      "--no-calibrate",
      ...extra,
      ...QUICK,
      "--json",
    );
    assert.equal(r.code, 0, r.err);
    return (lines(r.out)[0].memory as Record<string, number>[]).map((m) => m.optimizerState);
  };
  const whole = await run();
  const half = await run("--shard-optimizer", "2");
  assert.ok(whole.every((b) => b > 0));
  assert.deepEqual(half, whole.map((b) => b / 2));
  const bad = await cli("advise", "--shard-optimizer", "0", ...QUICK);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--shard-optimizer must be a positive integer, got "0"/);
});

Deno.test("cli advise --verify 1: the first line carries measuredMs, the others do not", async () => {
  const r = await cli(
    "advise",
    "--schedule",
    "1f1b,zb-h1",
    "--ranks",
    "2",
    "--microbatches",
    "4",
    "--verify",
    "1",
    "--verify-steps",
    "3",
    ...QUICK,
    "--json",
  );
  assert.equal(r.code, 0, r.err);
  const [first, second] = lines(r.out);
  assert.ok(typeof first.measuredMs === "number" && first.measuredMs > 0);
  assert.equal((first.measuredActivationBytes as number[]).length, 2);
  assert.ok(!("measuredMs" in second));
});

Deno.test("cli advise --model: a user's module (an MLP with its own loss and optimizer)", async () => {
  const path = new URL("./_advise_mlp.ts", import.meta.url).pathname;
  const r = await cli(
    "advise",
    "--model",
    path,
    "--schedule",
    "gpipe,zb-h1",
    "--ranks",
    "2",
    "--microbatches",
    "4",
    ...QUICK,
    "--json",
  );
  assert.equal(r.code, 0, r.err);
  const rows = lines(r.out);
  assert.equal(rows.length, 2);
  // 7 layers cut in two.
  for (const row of rows) assert.equal((row.boundaries as number[]).at(-1), 7);
  // SGD with momentum keeps one buffer per parameter: as many bytes as the parameters.
  const mem = rows[0].memory as Record<string, number>[];
  for (const m of mem) assert.equal(m.optimizerState, m.parameters);
});

Deno.test("cli advise: bad flags exit 2 naming the flag and value, before any work", async () => {
  const cases: [string[], RegExp][] = [
    [
      ["--ranks", "0"],
      /--ranks must be a positive integer or a comma-separated list of them, got "0"/,
    ],
    [["--microbatches", "4,x"], /--microbatches must be .* got "4,x"/],
    [["--schedule", "1f1b,nope"], /--schedule must be names from .* got "nope"/],
    [["--backend", "tpu"], /--backend must be cpu, webgpu or auto, got "tpu"/],
    [["--rank-memory", "12XB"], /--rank-memory must be a positive number of bytes .* got "12XB"/],
    [["--verify", "-1"], /--verify must be an integer >= 0, got -1/],
    [["--verify-steps", "1"], /--verify-steps must be at least 2, got 1/],
    [["--heads", "3"], /--heads must divide --dim/],
    [["--batch", "4", "--microbatches", "8"], /--batch 4 is smaller than --microbatches 8/],
    [["--model", "x.ts", "--dim", "8"], /--dim describes the built-in tiny GPT/],
    [["--model", "/nonexistent/model.ts"], /--model \/nonexistent\/model.ts: cannot import it/],
    [["--frobnicate"], /unknown flag --frobnicate for "advise"/],
  ];
  for (const [args, re] of cases) {
    const r = await cli("advise", ...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
    assert.match(r.err, re);
    assert.equal(r.out, "");
  }
});

Deno.test("cli advise --help and the command list", async () => {
  const h = await cli("advise", "--help");
  assert.equal(h.code, 0);
  assert.match(h.out, /--rank-memory BYTES/);
  assert.match(h.out, /createAdviseModel/);
  assert.match(h.out, /--no-calibrate/);
  const all = await cli("--help");
  assert.match(all.out, /advise\s+which schedule for this model/);
});
