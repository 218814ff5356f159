/**
 * A terminal's Ctrl-C sends SIGINT to every process of its foreground
 * group: with the README's save-on-interrupt pattern, the script finishes
 * its window, saves and exits 0 in every rank group (the subprocess group's
 * host leaves the signal to the script). The script runs in a process group
 * of its own (setsid), which gets the signal as a terminal would send it.
 *
 * @module
 */

import assert from "node:assert/strict";

const SCRIPT = new URL("./_interrupt_script.ts", import.meta.url).pathname;

const CASES = [
  ["workers", "SIGINT"],
  ["subprocess", "SIGINT"],
  ["in-process", "SIGINT"],
  ["subprocess", "SIGTERM"],
] as const;

for (const [rankGroup, signal] of CASES) {
  Deno.test(`${signal} to the process group (${rankGroup}): the script saves its checkpoint and exits 0`, async () => {
    const dir = await Deno.makeTempDir();
    const path = `${dir}/interrupted.ckpt.safetensors`;
    // Not a group leader, setsid makes this process one: its pid is the group's id.
    const child = new Deno.Command("setsid", {
      args: [Deno.execPath(), "run", "-A", SCRIPT, rankGroup, path, signal],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let out = "", err = "";
    const reading = Promise.all([
      (async () => {
        for await (const t of child.stdout.pipeThrough(new TextDecoderStream())) out += t;
      })(),
      (async () => {
        for await (const t of child.stderr.pipeThrough(new TextDecoderStream())) err += t;
      })(),
    ]);
    const killer = setTimeout(() => Deno.kill(-child.pid, "SIGKILL"), 60_000);
    try {
      for (let i = 0; !/step 3\n/.test(out); i++) {
        assert.ok(i < 3000, `no third step within 60 s:\n${out}\n${err}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      Deno.kill(-child.pid, signal);
      const status = await child.status;
      await reading;
      assert.equal(status.code, 0, `${out}\n${err}`);
      const m = /saved (\d+) aborted true\n$/.exec(out);
      assert.ok(m !== null, out);
      assert.ok(Number(m[1]) >= 3, out);
      assert.ok((await Deno.stat(path)).size > 0);
      assert.doesNotMatch(err, /SIGINT|SIGTERM|exited/, err);
    } finally {
      clearTimeout(killer);
      await Deno.remove(dir, { recursive: true });
    }
  });
}
