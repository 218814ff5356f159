// bench/_args.ts: every `deno run` bench reads its flags the same way.
// `--help` lists the flags with their defaults and exits 0; a mistyped flag,
// a flag without its value or a stray argument is one line naming it and
// exit code 2, before the bench does any work. Run as child processes (the
// helper exits), with no permissions: --help and a refusal need none.

import assert from "node:assert/strict";
import { benchArgs } from "../../bench/_args.ts";

async function runBench(script: string, ...args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-check",
      "--no-prompt",
      new URL(`../../bench/${script}`, import.meta.url).pathname,
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

Deno.test("bench flags: --help lists each flag with its default and exits 0", async () => {
  const r = await runBench("measured_vs_simulated.ts", "--help");
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^Usage: deno run -A bench\/measured_vs_simulated\.ts \[flags\]/);
  assert.match(r.stdout, /--repeats VALUE +default 3/);
  assert.match(r.stdout, /--help +this text/);
});

Deno.test("bench flags: a mistyped flag, a missing value or a stray argument is one line and exit code 2", async () => {
  const typo = await runBench("measured_vs_simulated.ts", "--repaets", "3");
  assert.equal(typo.code, 2);
  assert.equal(
    typo.stderr.trim(),
    "bench/measured_vs_simulated.ts: unknown flag --repaets; did you mean --repeats? (see --help)",
  );
  const bare = await runBench("measured_vs_simulated.ts", "--repeats");
  assert.equal(bare.code, 2);
  assert.equal(
    bare.stderr.trim(),
    "bench/measured_vs_simulated.ts: --repeats needs a value (see --help)",
  );
  const stray = await runBench("measured_vs_simulated.ts", "20");
  assert.equal(stray.code, 2);
  assert.equal(
    stray.stderr.trim(),
    'bench/measured_vs_simulated.ts: unexpected argument "20" (see --help)',
  );
});

Deno.test("bench flags: a count or a size out of its rule is one line naming flag, rule and value, and exit code 2", async () => {
  for (
    const [script, args, line] of [
      [
        "measured_vs_simulated.ts",
        ["--repeats", "-1"],
        'bench/measured_vs_simulated.ts: --repeats must be an integer ≥ 1, got "-1" (see --help)',
      ],
      [
        "measured_vs_simulated.ts",
        ["--repeats=2.5"],
        'bench/measured_vs_simulated.ts: --repeats must be an integer ≥ 1, got "2.5" (see --help)',
      ],
      [
        "schedules_bench.ts",
        ["--ms", "0"],
        'bench/schedules_bench.ts: --ms must be a finite number > 0, got "0" (see --help)',
      ],
    ] as const
  ) {
    const r = await runBench(script, ...args);
    assert.equal(r.code, 2, `${script} ${args.join(" ")}: ${r.stdout}`);
    assert.equal(r.stderr.trim(), line);
  }
});

Deno.test("bench flags: values, defaults and repeated flags come back as parseArgs gives them", () => {
  const v = benchArgs("bench/x.ts", {
    steps: { type: "string", default: "4" },
    json: { type: "boolean", default: false },
    schedule: { type: "string", multiple: true },
  }, ["--json", "--schedule", "gpipe", "--schedule=1f1b"]);
  assert.deepEqual({ ...v }, { steps: "4", json: true, schedule: ["gpipe", "1f1b"] });
  for (const args of [["--steps=-1"], ["--steps", "-1"]]) {
    assert.equal(benchArgs("bench/x.ts", { steps: { type: "string" } }, args).steps, "-1");
  }
});
