import assert from "node:assert/strict";

const root = new URL("../../", import.meta.url).pathname;
const script = `${root}examples/training_script.ts`;

/** Runs the README's training script with the permissions the README gives it. */
async function run(
  dir: string,
  args: string[],
): Promise<{ code: number; out: string; err: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      `--allow-read=${root},${dir}`,
      `--allow-write=${dir}`,
      script,
      ...args,
    ],
    cwd: dir,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

// "step 12  loss 3.359  lr 3.00e-3  bubble 20%  85 ms" → "step 12  loss 3.359  lr 3.00e-3"
const computed = (out: string) =>
  out.split("\n").filter((l) => l !== "" && !l.startsWith("checkpoint")).map((l) =>
    l.replace(/ {2}bubble .*$/, "")
  );

Deno.test("README training script: runs as shown, and stopping at step 20 then resuming prints the uninterrupted run's losses, lrs and validations", async () => {
  const a = await Deno.makeTempDir(), b = await Deno.makeTempDir();
  try {
    const whole = await run(a, []);
    assert.equal(whole.code, 0, whole.err);
    const lines = computed(whole.out);
    assert.equal(lines.filter((l) => l.startsWith("step ")).length, 60);
    assert.equal(lines.filter((l) => l.includes("validation: loss")).length, 3);
    assert.match(lines[0], /^step 1 {2}loss \d\.\d{3} {2}lr 1\.00e-3$/, "warmup starts at lr / 3");
    assert.match(whole.out, /checkpoint at step 60: tiny_gpt\.ckpt\.safetensors\n$/);
    const first = await run(b, ["20"]);
    assert.equal(first.code, 0, first.err);
    assert.match(first.out, /checkpoint at step 20/);
    const rest = await run(b, []);
    assert.equal(rest.code, 0, rest.err);
    assert.match(rest.out, /^step 21 /);
    assert.deepEqual([...computed(first.out), ...computed(rest.out)], lines);
    // Nothing left to do: a third run resumes at 60, trains nothing and exits.
    const again = await run(b, []);
    assert.equal(again.code, 0, again.err);
    assert.equal(again.out, "checkpoint at step 60: tiny_gpt.ckpt.safetensors\n");
  } finally {
    await Deno.remove(a, { recursive: true });
    await Deno.remove(b, { recursive: true });
  }
});

Deno.test("README: the training script section shows examples/training_script.ts as it is (but the JSR import)", async () => {
  const readme = await Deno.readTextFile(`${root}README.md`);
  const at = readme.indexOf("## A training script");
  assert.ok(at >= 0, "the section exists");
  const start = readme.indexOf("```ts\n", at) + 6;
  const shown = readme.slice(start, readme.indexOf("\n```\n", start));
  const file = await Deno.readTextFile(script);
  const code = file.slice(file.indexOf("import {")).trimEnd()
    .replace('} from "../mod.ts";', '} from "jsr:@conveyor/core";');
  assert.equal(shown, code);
});
