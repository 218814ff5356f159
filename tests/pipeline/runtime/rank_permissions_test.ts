/**
 * A rank never has more permission than the script that started it: a
 * script run with a deny list (`deno run -A --deny-write=DIR`) starts each
 * kind of rank group, and every rank tries to write into DIR and into a
 * folder it may write. The subprocess group also starts under scoped flags
 * alone, leaving nothing in the temporary folder.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  checkPermissionFlags,
  permissionFlagsIn,
} from "../../../src/pipeline/runtime/_permission_flags.ts";
import { SubprocessRankGroup } from "../../../src/pipeline/runtime/subprocess_rank_group.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { SYNTHETIC_EXECUTOR_URL } from "../../../src/pipeline/testing/synthetic_executor.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const SCRIPT = new URL("./_permission_script.ts", import.meta.url).pathname;

interface Outcome {
  code: number;
  out: { events?: number; writes?: Record<string, string[]>; startError?: string };
  err: string;
}

async function runScript(
  flags: string[],
  args: string[],
  env: Record<string, string> = {},
): Promise<Outcome> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", ...flags, SCRIPT, ...args],
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(r.stdout).trim();
  const err = new TextDecoder().decode(r.stderr);
  assert.equal(r.code, 0, `${text}\n${err}`);
  return { code: r.code, out: JSON.parse(text.split("\n").at(-1)!), err };
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

for (const kind of ["workers", "subprocess", "in-process"]) {
  Deno.test(`${kind} ranks cannot cross their script's deny list (deno run -A --deny-net --deny-write=DIR)`, async () => {
    const base = await Deno.makeTempDir();
    try {
      const denied = `${base}/denied`, allowed = `${base}/allowed`;
      await Deno.mkdir(denied);
      await Deno.mkdir(allowed);
      const r = await runScript(["-A", "--deny-net", `--deny-write=${denied}`], [
        kind,
        `${denied}/f`,
        `${allowed}/f`,
      ]);
      assert.equal(r.out.startError, undefined);
      assert.equal(r.out.events, 8);
      for (const rank of [0, 1]) {
        assert.match(r.out.writes![`${denied}/f`][rank], /^NotCapable: Requires write access/);
        assert.equal(
          await exists(`${denied}/f.${rank}`),
          false,
          `rank ${rank} wrote into ${denied}`,
        );
        assert.equal(r.out.writes![`${allowed}/f`][rank], "wrote");
        assert.equal(await Deno.readTextFile(`${allowed}/f.${rank}`), `rank ${rank}`);
      }
    } finally {
      await Deno.remove(base, { recursive: true });
    }
  });
}

for (const kind of ["subprocess", "workers"]) {
  Deno.test(`${kind} ranks start under scoped flags (read the package, write one folder, run Deno) and stay inside them`, async () => {
    const base = await Deno.makeTempDir();
    try {
      const allowed = `${base}/allowed`, other = `${base}/other`, tmp = `${base}/tmp`;
      await Promise.all([allowed, other, tmp].map((d) => Deno.mkdir(d)));
      const r = await runScript(
        [
          `--allow-read=${ROOT},${base}`,
          `--allow-write=${allowed}`,
          ...(kind === "subprocess" ? [`--allow-run=${Deno.execPath()}`] : []),
        ],
        [kind, `${allowed}/f`, `${other}/f`],
        { TMPDIR: tmp },
      );
      assert.equal(r.out.startError, undefined);
      assert.equal(r.out.events, 8);
      for (const rank of [0, 1]) {
        assert.equal(r.out.writes![`${allowed}/f`][rank], "wrote");
        assert.match(r.out.writes![`${other}/f`][rank], /^NotCapable: Requires write access/);
      }
      assert.deepEqual(await Array.fromAsync(Deno.readDir(tmp)), [], "nothing left in TMPDIR");
    } finally {
      await Deno.remove(base, { recursive: true });
    }
  });
}

Deno.test({
  name: "a subprocess group is refused where this thread has less than its command line gave",
  permissions: { read: true, run: true, env: true, sys: true, ffi: true, net: true, write: false },
  async fn() {
    await assert.rejects(
      SubprocessRankGroup.create({
        schedule: generateSchedule("1f1b", { ranks: 2, microBatches: 2 }),
        executor: { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 1 } },
      }),
      /rank 0 failed to start: the ranks' host process cannot be given exactly this process's permissions: .*write is \w+ here, not granted/,
    );
  },
});

Deno.test("permission flags are read from Deno's own arguments, as given", () => {
  assert.deepEqual(permissionFlagsIn(["run", "-A", "--deny-write=/x,/y", "s.ts"]), [
    "-A",
    "--deny-write=/x,/y",
  ]);
  assert.deepEqual(permissionFlagsIn(["-qRW=/d", "--allow-all", "--ignore-env=HOME"]), [
    "--allow-read",
    "--allow-write=/d",
    "-A",
    "--ignore-env=HOME",
  ]);
  // A flag's value is not a flag; `--` ends Deno's arguments.
  assert.deepEqual(
    permissionFlagsIn(["test", "--seed", "-A", "-c", "-N", "--allow-env", "--", "-A"]),
    [
      "--allow-env",
    ],
  );
  assert.deepEqual(permissionFlagsIn(["eval", "code"]), ["-A"]);
  assert.throws(() => permissionFlagsIn(["run", "-P", "s.ts"]), /permission set \(-P\)/);
  assert.throws(() => permissionFlagsIn(["run", "--permission-set=ci", "s.ts"]), /permission set/);
  // Checked against this process (run with -A): a deny it does not have is refused.
  checkPermissionFlags(["-A", "--allow-write=/tmp"]);
  assert.throws(
    () => checkPermissionFlags(["--deny-write=/tmp"]),
    /started with --deny-write=\/tmp, but write of "\/tmp" is granted here, not denied/,
  );
});
