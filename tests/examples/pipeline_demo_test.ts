import assert from "node:assert/strict";

const script = new URL("../../examples/pipeline_demo.ts", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

Deno.test("pipeline demo: trains across worker stages, reports bubble and memory, writes the SVG", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const svg = `${dir}/timeline.svg`;
    const r = await run([
      "--backend=cpu",
      "--schedule=1f1b",
      "--stages=2",
      "--microbatches=4",
      "--steps=3",
      `--svg=${svg}`,
    ]);
    assert.equal(r.code, 0, r.err);
    const steps = r.out.split("\n").filter((l) =>
      /^step \d\/3 {2}loss \d+\.\d{4} {2}bubble/.test(l)
    );
    assert.equal(steps.length, 3, r.out);
    assert.match(r.out, /pipeline: 1f1b, 2 stages in workers/);
    const loss = r.out.match(/^loss (\d+\.\d+) → (\d+\.\d+) over 3 steps$/m);
    assert.ok(loss, r.out);
    // The first loss of an untrained model is close to ln(vocabulary) = ln 56.
    assert.ok(Math.abs(Number(loss[1]) - Math.log(56)) < 0.15, loss[1]);
    const ranks = r.out.split("\n").filter((l) => /^ {2}rank \d \(stages \d+\): \d+ KiB/.test(l));
    assert.equal(ranks.length, 2, r.out);
    const text = await Deno.readTextFile(svg);
    assert.match(text, /^<svg[\s\S]*<\/svg>\s*$/);
    assert.match(text, /1f1b: 2 stages, 4 micro-batches, measured step 3/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pipeline demo: bad options exit with status 2 and name the value", async () => {
  const name = await run(["--schedule=fast"]);
  assert.equal(name.code, 2);
  assert.match(name.err, /--schedule must be one of gpipe, .*got "fast"/);
  const stages = await run(["--stages=0"]);
  assert.equal(stages.code, 2);
  assert.match(stages.err, /--stages must be a positive integer, got "0"/);
  const backend = await run(["--backend=tpu"]);
  assert.equal(backend.code, 2);
  assert.match(backend.err, /--backend must be auto, webgpu or cpu, got "tpu"/);
  const combo = await run(["--schedule=interleaved-1f1b", "--stages=4", "--microbatches=9"]);
  assert.equal(combo.code, 2);
  assert.match(combo.err, /error: .*9/);
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
      `--svg=${dir}/t.svg`,
      `--text=${file}`,
    ];
    const r = await run([...args, "--sample=15", "--prompt=not ", "--temperature=0"]);
    assert.equal(r.code, 0, r.err);
    // Distinct characters: space, newline, b, e, n, o, r, t.
    assert.ok(
      r.out.includes(`vocabulary 8; batch 16 × 32 characters of ${file} (190 characters)`),
      r.out,
    );
    const sample = JSON.parse(r.out.match(/^sample: (".*")$/m)![1]) as string;
    assert.equal(sample.length, 4 + 15);
    assert.ok(sample.startsWith("not "), sample);
    assert.match(sample, /^[ \nbenort]+$/);
    const none = await run([...args, "--sample=0"]);
    assert.equal(none.code, 0, none.err);
    assert.doesNotMatch(none.out, /^sample:/m);
    const bad = await run([...args, "--prompt=xyz"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--prompt has "x", which is not in the text/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
