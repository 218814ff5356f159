// The README's commands with scoped flags run on a terminal without a
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
