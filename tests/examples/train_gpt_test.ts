import assert from "node:assert/strict";

const script = new URL("../../examples/train_gpt.ts", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const p = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, ...args],
    stdout: "piped",
    stderr: "piped",
  });
  const r = await p.output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

Deno.test("train_gpt demo: plain lines with the loss per step when stdout is not a terminal", async () => {
  const r = await run([
    "--backend=cpu",
    "--steps=6",
    "--dim=8",
    "--heads=2",
    "--layers=1",
    "--seq-len=8",
    "--batch=4",
    "--sample=12",
  ]);
  assert.equal(r.code, 0, r.err);
  assert.ok(!r.out.includes("\r"), "no carriage returns in a pipe");
  const steps = r.out.split("\n").filter((l) => /^step +\d+\/6 {2}loss \d+\.\d{4}/.test(l));
  assert.equal(steps.length, 6, r.out);
  assert.match(r.out, /vocabulary 56 \(ln V = 4\.025\)/);
  assert.match(r.out, /^loss \d\.\d{3} → \d\.\d{3} \(mean of the last 6\)/m);
  const sample = r.out.match(/^sample: (".*")$/m);
  assert.ok(sample, r.out);
  assert.equal(JSON.parse(sample[1]).length, 4 + 12, "prompt plus 12 characters");
});

Deno.test("train_gpt demo: bad options exit with status 2 and name the value", async () => {
  const bad = await run(["--backend=tpu"]);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--backend must be auto, cpu or webgpu, got tpu/);
  const heads = await run(["--dim=10", "--heads=4"]);
  assert.equal(heads.code, 2);
  assert.match(heads.err, /--heads must divide --dim, got heads 4 and dim 10/);
  const steps = await run(["--steps=0"]);
  assert.match(steps.err, /--steps must be an integer ≥ 1, got 0/);
});

Deno.test("train_gpt demo: --text FILE trains on that file's characters and samples from its prompt", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/text.txt`;
    const text = "ab ba abba baab\n".repeat(8);
    await Deno.writeTextFile(file, text);
    const common = ["--backend=cpu", "--steps=3", "--dim=8", "--heads=2", "--seq-len=8"];
    const r = await run([...common, `--text=${file}`, "--sample=20", "--temperature=0.5"]);
    assert.equal(r.code, 0, r.err);
    // 4 distinct characters: a, b, space and newline.
    assert.ok(r.out.includes(`${file}: 128 characters, vocabulary 4 (ln V = 1.386)`), r.out);
    const sample = JSON.parse(r.out.match(/^sample: (".*")$/m)![1]) as string;
    assert.equal(sample.length, 4 + 20);
    assert.ok(sample.startsWith("ab b"), sample); // the file's first 4 characters
    assert.match(sample, /^[ab \n]+$/);
    const prompted = await run([...common, `--text=${file}`, "--sample=5", "--prompt=baab"]);
    assert.equal(prompted.code, 0, prompted.err);
    assert.ok(JSON.parse(prompted.out.match(/^sample: (".*")$/m)![1]).startsWith("baab"));

    const badPrompt = await run([...common, `--text=${file}`, "--prompt=The "]);
    assert.equal(badPrompt.code, 2);
    assert.match(badPrompt.err, /--prompt has "T", which is not in the text/);
    const missing = await run([...common, `--text=${dir}/nope.txt`]);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /cannot read --text .*nope\.txt/);
    await Deno.writeTextFile(`${dir}/short.txt`, "abc");
    const short = await run([...common, `--text=${dir}/short.txt`]);
    assert.equal(short.code, 2);
    assert.match(short.err, /short\.txt has 3 characters; training needs at least 9/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train_gpt demo: --help prints the usage, capitalised as every other script's, and exits 0", async () => {
  const r = await run(["--help"]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^Usage: deno run -A examples\/train_gpt\.ts \[options\]/);
});
