import assert from "node:assert/strict";
import { interruptAfter } from "../_interrupt.ts";

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

interface Line {
  step: number;
  loss: number;
  lr: number;
  validationLoss?: number;
  validationAccuracy?: number;
}

/** The metrics log's computed fields (not the timings). */
async function metrics(dir: string): Promise<Line[]> {
  const text = await Deno.readTextFile(`${dir}/metrics.jsonl`);
  return text.trimEnd().split("\n").map((l) => {
    const { step, loss, lr, validationLoss, validationAccuracy } = JSON.parse(l);
    return { step, loss, lr, validationLoss, validationAccuracy };
  });
}

// "step 20/60  loss 2.994  78 ms/step  ETA 3 s  validation 3.041 (19.5%)" → step, loss, validation
const progress = (out: string) =>
  out.split("\n").filter((l) => l.startsWith("step ")).map((l) =>
    l.replace(/ {2}\d+ ms\/step {2}ETA [^ ]+ [a-z]+/, "")
  );

Deno.test("README training script: runs as shown (a progress line every 10 steps, a metrics log, a validation every 20 steps), and stopping at step 20 then resuming gives the uninterrupted run's losses, lrs and validations", async () => {
  const a = await Deno.makeTempDir(), b = await Deno.makeTempDir();
  try {
    const whole = await run(a, []);
    assert.equal(whole.code, 0, whole.err);
    const lines = progress(whole.out);
    assert.deepEqual(
      lines.map((l) => l.split("  ")[0]),
      [10, 20, 30, 40, 50, 60].map((s) => `step ${s}/60`),
    );
    assert.match(lines[1], /^step 20\/60 {2}loss \d\.\d{3} {2}validation \d\.\d{3} \(\d+\.\d%\)$/);
    assert.match(whole.out, /checkpoint at step 60: tiny_gpt\.ckpt\.safetensors\n$/);
    const log = await metrics(a);
    assert.deepEqual(log.map((l) => l.step), Array.from({ length: 60 }, (_, i) => i + 1));
    assert.equal(log[0].lr.toExponential(2), "1.00e-3", "warmup starts at lr / 3");
    assert.deepEqual(
      log.filter((l) => l.validationLoss !== undefined).map((l) => l.step),
      [20, 40, 60],
    );
    assert.ok(log.every((l) => Number.isFinite(l.loss)));
    // The validation printed at step 20 is the one logged for step 20.
    assert.ok(
      lines[1].endsWith(
        `validation ${log[19].validationLoss!.toFixed(3)} (${
          (100 * log[19].validationAccuracy!).toFixed(1)
        }%)`,
      ),
    );
    const first = await run(b, ["20"]);
    assert.equal(first.code, 0, first.err);
    assert.match(first.out, /checkpoint at step 20/);
    const rest = await run(b, []);
    assert.equal(rest.code, 0, rest.err);
    assert.match(rest.out, /^step 30\/60 /);
    assert.deepEqual(await metrics(b), log, "the appended log equals the uninterrupted one");
    assert.deepEqual(
      [...progress(first.out), ...progress(rest.out)].map((l) => l.replace(/ {2}validation.*/, "")),
      lines.map((l) => l.replace(/ {2}validation.*/, "")),
    );
    // Nothing left to do: a third run resumes at 60, trains nothing and exits.
    const again = await run(b, []);
    assert.equal(again.code, 0, again.err);
    assert.equal(again.out, "checkpoint at step 60: tiny_gpt.ckpt.safetensors\n");
    assert.equal((await metrics(b)).length, 60);
  } finally {
    await Deno.remove(a, { recursive: true });
    await Deno.remove(b, { recursive: true });
  }
});

Deno.test("README training script: a Ctrl-C (SIGINT) ends the window, saves the checkpoint and exits 0; the next run resumes there and the log equals the uninterrupted run's", async () => {
  const a = await Deno.makeTempDir(), b = await Deno.makeTempDir();
  try {
    const whole = await run(a, []);
    assert.equal(whole.code, 0, whole.err);
    // Interrupted once the first progress line is out (step 10 of 60).
    const { code, out, err } = await interruptAfter(
      ["run", "--quiet", `--allow-read=${root},${b}`, `--allow-write=${b}`, script],
      "step 10/60",
      b,
    );
    assert.equal(code, 0, err);
    const at = Number(/checkpoint at step (\d+): tiny_gpt\.ckpt\.safetensors\n$/.exec(out)?.[1]);
    assert.ok(at >= 10 && at < 60, `interrupted at step ${at}: ${out}`);
    const rest = await run(b, []);
    assert.equal(rest.code, 0, rest.err);
    assert.match(rest.out, /checkpoint at step 60: tiny_gpt\.ckpt\.safetensors\n$/);
    assert.deepEqual(
      await metrics(b),
      await metrics(a),
      "the resumed log equals the uninterrupted one",
    );
  } finally {
    await Deno.remove(a, { recursive: true });
    await Deno.remove(b, { recursive: true });
  }
});
