import assert from "node:assert/strict";

const script = new URL("../../examples/pipeline_demo.ts", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, ...args],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

// A model small enough for a test (the demo's own sizes are for speed).
const SMALL = ["--dim=16", "--layers=2", "--heads=2", "--seq-len=16", "--batch=8"];

/** The summary row `name`: its two cells (1 rank, P ranks). */
function row(out: string, name: string): [string, string] {
  const line = out.split("\n").find((l) => l.trimStart().startsWith(name));
  assert.ok(line, `no summary row "${name}" in:\n${out}`);
  const cells = line.trim().slice(name.length).trim().split(/\s{2,}/);
  return cells.length === 1 ? ["", cells[0]] : [cells[0], cells[1]];
}

Deno.test("pipeline demo: trains on 1 rank and on P, prints the side-by-side summary and the speedup, writes both pictures", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const svg = `${dir}/timeline.svg`, lossSvg = `${dir}/loss.svg`;
    const r = await run([
      "--backend=cpu",
      "--schedule=1f1b",
      "--stages=2",
      "--microbatches=4",
      "--steps=3",
      "--warmup=1",
      ...SMALL,
      `--svg=${svg}`,
      `--loss-svg=${lossSvg}`,
    ]);
    assert.equal(r.code, 0, r.err);
    assert.doesNotMatch(r.err, /backend "auto"/, "no auto notice when the backend is given");
    assert.match(
      r.out,
      /backend cpu: 1 rank, then 2 ranks in workers with 1f1b \(4 micro-batches\)/,
    );
    // Every step of both runs, the first a warm-up.
    const steps = r.out.split("\n").filter((l) => /^ {2}step +\d+ .* loss \d+\.\d{4} /.test(l));
    assert.equal(steps.length, 8, r.out);
    // The first loss of an untrained model is close to ln(vocabulary) = ln 56.
    const losses = row(r.out, "loss, first → last").map((c) => c.split(" → ").map(Number));
    assert.ok(Math.abs(losses[0][0] - Math.log(56)) < 0.15, String(losses[0]));
    // The same training on 1 and 2 ranks: the one rank trains the whole batch at
    // once, the two ranks in micro-batches, so the f32 sums of the gradients
    // run in another order and the losses agree to rounding.
    const agree =
      /^losses on 1 and 2 ranks(: identical at every step| agree to (\S+)) \(the same training\)$/m
        .exec(r.out);
    assert.ok(agree !== null, r.out);
    assert.ok(agree[2] === undefined || Number(agree[2]) <= 1e-5, agree[0]);
    for (const [a, b] of [[losses[0][0], losses[1][0]], [losses[0][1], losses[1][1]]]) {
      assert.ok(Math.abs(a - b) <= 1e-4, `losses ${losses[0]} and ${losses[1]}`);
    }
    for (const name of ["step time, median", "step time, spread (2 steps)"]) {
      for (const c of row(r.out, name)) assert.match(c, /^\d+(–\d+)? ms$/, `${name}: ${c}`);
    }
    for (const name of ["bubble, measured", "bubble, simulated"]) {
      for (const c of row(r.out, name)) assert.match(c, /^\d+\.\d%$/, `${name}: ${c}`);
    }
    const [one0, many0] = row(r.out, "peak activations, rank 0");
    const [none1, many1] = row(r.out, "peak activations, rank 1");
    assert.equal(none1, "");
    for (const c of [one0, many0, many1]) {
      assert.match(c, /^\d+ KiB$/);
      assert.ok(parseInt(c) > 0, `a real figure: ${c}`);
    }
    assert.match(r.out, /^speedup: \d+\.\d\dx \(2 ranks, 1f1b\)$/m);
    assert.match(r.out, new RegExp(`^loss curves written to ${lossSvg}$`, "m"));
    assert.match(r.out, new RegExp(`^timeline of the last 2-rank step written to ${svg}$`, "m"));
    const timeline = await Deno.readTextFile(svg);
    assert.match(timeline, /^<svg[\s\S]*<\/svg>\s*$/);
    assert.match(timeline, /1f1b: 2 ranks, 4 micro-batches, last measured step \(4\)/);
    const curves = await Deno.readTextFile(lossSvg);
    assert.match(curves, /^<svg[\s\S]*<\/svg>\s*$/);
    assert.equal(curves.match(/<polyline /g)?.length, 2, "a loss curve per run");
    assert.match(curves, />2 ranks \(left, log scale\)</);
    assert.match(curves, />1 rank \(left\)</, "the one-rank run in the legend");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pipeline demo: by default, backend auto said once and ranks from the cores (2 to 4)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = await run([
      "--steps=4",
      "--rounds=2",
      "--warmup=0",
      "--microbatches=4",
      ...SMALL,
      `--svg=${dir}/t.svg`,
      `--loss-svg=${dir}/l.svg`,
    ]);
    assert.equal(r.code, 0, r.err);
    // The runs take turns: two windows of 2 steps each, a period per window.
    assert.match(r.out, /then 2 measured windows of 2 steps each, taking turns/);
    assert.match(r.out, /step time, spread \(2 steps\)/);
    const notices = r.err.split("\n").filter((l) => l.startsWith("conveyor: backend"));
    assert.equal(notices.length, 1, r.err);
    const kind = notices[0].match(/^conveyor: backend "auto" chose (cpu|webgpu): /)?.[1];
    assert.ok(kind, notices[0]);
    const p = Math.max(2, Math.min(4, navigator.hardwareConcurrency));
    assert.match(
      r.out,
      new RegExp(`backend ${kind}: 1 rank, then ${p} ranks in workers with zb-h1`),
    );
    assert.match(r.out, new RegExp(`^speedup: \\d+\\.\\d\\dx \\(${p} ranks, zb-h1\\)$`, "m"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pipeline demo: bad options exit with status 2 and name the value", async () => {
  const cases: [string[], RegExp][] = [
    [["--schedule=fast"], /--schedule must be one of gpipe, .*got "fast"/],
    [["--stages=0"], /--stages must be a positive integer, got "0"/],
    [["--steps=1"], /--steps must be an integer ≥ 2, got "1"/],
    [["--steps=4", "--rounds=3"], /--rounds must divide --steps into windows of at least 2 steps/],
    [["--steps=4", "--rounds=4"], /--rounds must divide --steps into windows of at least 2 steps/],
    [["--backend=tpu"], /--backend must be auto, webgpu or cpu, got "tpu"/],
    [["--dim=30", "--heads=4"], /--heads must divide --dim, got --heads 4 and --dim 30/],
    [["--batch=4"], /--batch 4 is smaller than --microbatches 8/],
    [["--schedule=interleaved-1f1b", "--stages=4", "--microbatches=9"], /error: .*9/],
    // Said before any training, not after the run.
    [
      ["--loss-svg=no-such-folder/l.svg"],
      /--loss-svg no-such-folder\/l\.svg: the folder no-such-folder does not exist/,
    ],
  ];
  for (const [args, re] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, `${args}: ${r.err}`);
    assert.match(r.err, re);
    assert.equal(r.out, "", "nothing runs");
  }
});

Deno.test("pipeline demo: --text FILE trains on that file and samples through the stages", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/text.txt`;
    await Deno.writeTextFile(file, "to be or not to be\n".repeat(10));
    const args = [
      "--backend=cpu",
      "--schedule=zb-h1",
      "--stages=2",
      "--microbatches=2",
      "--steps=2",
      "--warmup=0",
      ...SMALL,
      `--svg=${dir}/t.svg`,
      `--loss-svg=${dir}/l.svg`,
      `--text=${file}`,
    ];
    const r = await run([...args, "--sample=15", "--prompt=not ", "--temperature=0"]);
    assert.equal(r.code, 0, r.err);
    // Distinct characters: space, newline, b, e, n, o, r, t.
    assert.ok(
      r.out.includes(`vocabulary 8; batch 8 × 16 characters of ${file} (190 characters)`),
      r.out,
    );
    const sample = JSON.parse(r.out.match(/^sample: (".*")$/m)![1]) as string;
    assert.equal(sample.length, 4 + 15);
    assert.ok(sample.startsWith("not "), sample);
    assert.match(sample, /^[ \nbenort]+$/);
    const none = await run(args);
    assert.equal(none.code, 0, none.err);
    assert.doesNotMatch(none.out, /^sample:/m, "no sample by default");
    const bad = await run([...args, "--prompt=xyz"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--prompt has "x", which is not in the text/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
