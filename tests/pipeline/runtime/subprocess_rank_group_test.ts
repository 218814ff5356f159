/**
 * A subprocess rank group whose script or host is killed leaves nothing
 * behind: no host process, no temporary folder, no uncaught error printed;
 * the script whose host was killed gets an error naming the ranks.
 *
 * @module
 */

import assert from "node:assert/strict";

const SCRIPT = new URL("./_host_script.ts", import.meta.url).pathname;

function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

async function until(what: string, ok: () => boolean, ms: number): Promise<number> {
  const t = performance.now();
  while (!ok()) {
    if (performance.now() - t > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now() - t;
}

/** Starts the script, waits for its host; `kill` then kills something. */
async function killDuringRun(kill: (script: number, host: number) => void) {
  const tmp = await Deno.makeTempDir();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", SCRIPT],
    env: { TMPDIR: tmp, NO_COLOR: "1" },
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
  await until("the host started", () => /running \d+/.test(out), 30_000);
  const host = Number(/running (\d+)/.exec(out)![1]);
  await new Promise((r) => setTimeout(r, 300)); // into the run
  kill(child.pid, host);
  const status = await child.status;
  await reading;
  const hostGoneMs = await until("the host ended", () => !alive(host), 30_000);
  const left = await Array.fromAsync(Deno.readDir(tmp));
  await Deno.remove(tmp, { recursive: true });
  return { status, out, err, hostGoneMs, left: left.map((e) => e.name) };
}

Deno.test("a script killed during a subprocess group's run: its host ends, nothing is left, nothing is printed", async () => {
  const r = await killDuringRun((script) => Deno.kill(script, "SIGKILL"));
  assert.equal(r.status.signal, "SIGKILL");
  // Liveness (the host ends on its own), with room for a loaded machine.
  assert.ok(r.hostGoneMs < 20_000, `the host outlived its script by ${r.hostGoneMs} ms`);
  assert.deepEqual(r.left, [], "nothing left in TMPDIR");
  assert.doesNotMatch(r.err, /Uncaught|ConnectionReset|BrokenPipe|error/i, r.err);
});

Deno.test("a subprocess group's host killed during a run: the script gets an error naming the ranks, no uncaught stack", async () => {
  const r = await killDuringRun((_, host) => Deno.kill(host, "SIGKILL"));
  assert.equal(r.status.code, 0, r.err);
  const end = JSON.parse(r.out.trim().split("\n").at(-1)!);
  assert.equal(end.name, "PipelineRankError");
  assert.equal(
    end.error,
    "rank 0 exited: the ranks' host process (ranks 0-1) exited with code 137 (SIGKILL)",
  );
  assert.deepEqual(r.left, [], "nothing left in TMPDIR");
  assert.doesNotMatch(r.err, /Uncaught|ConnectionReset|BrokenPipe/i, r.err);
});
