import assert from "node:assert/strict";

const script = new URL("../../examples/learn_addition.ts", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

Deno.test("learn_addition: a short run prints progress, held-out answers, the SVG and one JSON line", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const svg = `${dir}/curves.svg`;
    const r = await run([
      "--steps=3",
      "--final-steps=1",
      "--eval-every=2",
      "--held-out=12",
      "--eval-size=8",
      "--show=3",
      "--json",
      `--svg=${svg}`,
    ]);
    assert.equal(r.code, 0, r.err);
    const lines = r.out.trimEnd().split("\n");
    // In a pipe, a progress line at each held-out measurement (--eval-every=2) and the last step.
    const progress = lines.filter((l) => /^step \d\/3 {2}loss \d+\.\d{4} {2}held-out /.test(l));
    assert.deepEqual(progress.map((l) => l.slice(0, 8)), ["step 2/3", "step 3/3"], r.out);
    assert.match(r.out, /answer "8610" \(the sum 168 as 4 digits, least significant first\)/);
    assert.match(r.out, /pipeline: zb-h1, 2 ranks in workers, 4 micro-batches of 16 problems/);
    // The last step ran on a pipeline rebuilt with the final lr and the trained weights.
    assert.match(r.out, /AdamW lr 0\.003, 0\.0003 for the last 1 step$/m);
    assert.match(r.out, /^held-out exact match: \d+\.\d% of 12 problems after 3 steps/m);
    const shown = lines.filter((l) => /^ {2}\d{3}\+\d{3}=\S{4} {3}[ \d]{3} \+ [ \d]{3} = /.test(l));
    assert.equal(shown.length, 3, r.out);
    const last = JSON.parse(lines[lines.length - 1]);
    assert.deepEqual(Object.keys(last), ["accuracy", "steps", "seconds", "ranks", "schedule"]);
    assert.ok(last.accuracy >= 0 && last.accuracy <= 1, String(last.accuracy));
    assert.equal(last.steps, 3);
    assert.ok(last.seconds > 0 && last.seconds < 300, String(last.seconds));
    assert.equal(last.ranks, 2);
    assert.equal(last.schedule, "zb-h1");
    const text = await Deno.readTextFile(svg);
    assert.match(text, /^<svg[\s\S]*<\/svg>\n$/);
    assert.equal(text.match(/<polyline /g)?.length, 2);
    assert.match(text, /lr 0\.003 → 0\.0003/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("learn_addition: bad options exit with status 2 and name the value", async () => {
  const cases: [string[], RegExp][] = [
    [["--schedule=fast"], /--schedule must be one of gpipe, .*got "fast"/],
    [["--ranks=0"], /--ranks must be an integer ≥ 1, got "0"/],
    [["--backend=tpu"], /--backend must be cpu, webgpu or auto, got "tpu"/],
    [["--answer-order=up"], /--answer-order must be reversed or plain, got "up"/],
    [["--dim=30", "--heads=4"], /--heads must divide --dim, got heads 4 and dim 30/],
    [["--lr=-1"], /--lr must be a positive number, got "-1"/],
    [
      ["--ranks=4", "--schedule=zb-v"],
      /zb-v on 4 ranks cuts the model into 8 stages, but 2 blocks make 5 layers: use --layers 5/,
    ],
    [["--final-lr=0"], /--final-lr must be a positive number, got "0"/],
    [["--steps=10", "--final-steps=10"], /--final-steps must be less than --steps \(10\), got 10/],
    [["--batch=2", "--microbatches=4"], /--batch must be at least --microbatches \(4\), got 2/],
    // Said before any training, not after the run.
    [
      ["--svg=no-such-folder/a.svg"],
      /--svg no-such-folder\/a\.svg: the folder no-such-folder does not exist/,
    ],
  ];
  for (const [args, want] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, `${args}: ${r.err}`);
    assert.match(r.err, want);
    assert.doesNotMatch(r.out, /^step /m, "no training ran");
  }
});

Deno.test("learn_addition: --steps alone shortens a run (the final-lr steps default to a quarter of them)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = await run([
      "--steps=8",
      "--layers=1",
      "--dim=16",
      "--heads=2",
      "--batch=16",
      "--eval-every=4",
      "--held-out=8",
      "--eval-size=8",
      "--show=0",
      `--svg=${dir}/c.svg`,
    ]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /AdamW lr 0\.003, 0\.0003 for the last 2 steps$/m);
    assert.match(r.out, /^held-out exact match: \d+\.\d% of 8 problems after 8 steps/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
