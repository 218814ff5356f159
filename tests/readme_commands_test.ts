// The README's commands: with scoped flags they run on a terminal without a
// permission prompt (off a terminal a missing permission is denied
// silently, so only a terminal shows one). Seen before: the worker ranks'
// start asked for env access (node:worker_threads copies process.env), and
// cli train asked for sys access (the machine's memory).

import assert from "node:assert/strict";
import { haveTerminal, runOnTerminal } from "./_terminal.ts";

const root = new URL("../", import.meta.url).pathname.replace(/\/$/, "");
const ignore = !haveTerminal();
if (ignore) console.warn("skipped: no `script` (util-linux) to give the commands a terminal");

Deno.test({
  name:
    "README: the training script under --allow-read/--allow-write asks for nothing on a terminal",
  ignore,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const r = await runOnTerminal([
        "run",
        "--quiet",
        `--allow-read=${root},${dir}`,
        `--allow-write=${dir}`,
        `${root}/examples/training_script.ts`,
        "2",
        `${dir}/ck.safetensors`,
      ], dir);
      assert.equal(r.prompted, false, r.out);
      assert.match(r.out, /step 2\/|2\/60|checkpoint/i, r.out);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "README: cli.ts train under --allow-read asks for nothing on a terminal",
  ignore,
  async fn() {
    const r = await runOnTerminal([
      "run",
      "--quiet",
      `--allow-read=${root}`,
      `${root}/cli.ts`,
      "train",
      "--schedule",
      "1f1b",
      "--ranks",
      "2",
      "--microbatches",
      "2",
      "--steps",
      "1",
      "--dim",
      "16",
    ], root);
    assert.equal(r.prompted, false, r.out);
    assert.match(r.out, /step 1\/1/, r.out);
  },
});

for (const example of ["regression_pipeline.ts", "own_layer.ts"]) {
  Deno.test({
    name: `README: examples/${example} under --allow-read asks for nothing on a terminal`,
    ignore,
    async fn() {
      const r = await runOnTerminal(
        ["run", "--quiet", `--allow-read=${root}`, `${root}/examples/${example}`],
        root,
      );
      assert.equal(r.prompted, false, r.out);
      assert.match(r.out, /loss/, r.out);
    },
  });
}

Deno.test("README: what its commands write into the checkout is ignored by git (mpi_regression's weights.safetensors was not)", async () => {
  // The files the README's and the examples' own commands write when run from the checkout.
  const written = [
    "weights.safetensors", // mpirun -n 2 deno run -A examples/mpi_regression.ts weights.safetensors
    "tiny_gpt.ckpt.safetensors", // examples/training_script.ts
    "metrics.jsonl", // examples/training_script.ts
    "timeline.svg", // deno task demo
    "loss.svg", // deno task demo
    "addition.svg", // examples/learn_addition.ts
  ];
  const git = await new Deno.Command("git", {
    args: ["-C", root, "check-ignore", "--no-index", ...written],
    stdout: "piped",
    stderr: "piped",
  }).output().catch(() => null);
  if (git === null || new TextDecoder().decode(git.stderr).includes("not a git repository")) {
    console.warn("skipped: no git checkout here");
    return;
  }
  const ignored = new TextDecoder().decode(git.stdout).trim().split("\n");
  assert.deepEqual(written.filter((f) => !ignored.includes(f)), [], "not ignored");
});
