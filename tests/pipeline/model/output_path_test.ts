import assert from "node:assert/strict";
import { checkOutputPath } from "../../../src/pipeline/model/output_path.ts";

const root = new URL("../../../", import.meta.url).pathname;

const typeError = (message: string) => (e: Error) => {
  assert.ok(e instanceof TypeError, `${e}`);
  assert.equal(e.message, message);
  return true;
};

Deno.test("checkOutputPath: a writable path passes (a path or a file: URL) and leaves nothing behind; an existing file is kept as it is", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (const write of ["replace", "direct"] as const) {
      assert.equal(checkOutputPath(`${dir}/a.bin`, "out", { write }), `${dir}/a.bin`);
      assert.equal(
        checkOutputPath(new URL(`file://${dir}/my%20b.bin`), "out", { write }),
        `${dir}/my b.bin`,
      );
    }
    assert.deepEqual([...Deno.readDirSync(dir)], [], "no probe left");
    await Deno.writeTextFile(`${dir}/kept.txt`, "data");
    for (const write of ["replace", "direct"] as const) {
      checkOutputPath(`${dir}/kept.txt`, "out", { write });
    }
    assert.equal(await Deno.readTextFile(`${dir}/kept.txt`), "data");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["kept.txt"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkOutputPath: a missing folder, a directory, a file as the folder, an empty path or another scheme: a TypeError naming the path and the rule", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/file`, "");
    for (const write of ["replace", "direct"] as const) {
      assert.throws(
        () => checkOutputPath(`${dir}/none/x.ckpt`, "--save-checkpoint", { write }),
        typeError(
          `--save-checkpoint ${dir}/none/x.ckpt: the folder ${dir}/none does not exist (create it first)`,
        ),
      );
      assert.throws(
        () => checkOutputPath(dir, "--trace", { write }),
        typeError(`--trace ${dir}: it is a directory: name a file to write`),
      );
      assert.throws(
        () => checkOutputPath(`${dir}/file/x`, "out", { write }),
        /out .*file\/x: .*(does not exist|is not a folder)/,
      );
      assert.throws(
        () => checkOutputPath("", "out", { write }),
        typeError("out must be a non-empty path or a file: URL, got an empty string"),
      );
      assert.throws(
        () => checkOutputPath(new URL("https://example.com/x"), "out", { write }),
        /only file: URLs name a local file/,
      );
    }
    assert.throws(() => checkOutputPath(`${dir}/x`, "out", { write: "later" as never }), TypeError);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkOutputPath: without Deno's permission, the flag to add is named (a script run with --allow-read only)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const script = `${dir}/check.ts`;
    await Deno.writeTextFile(
      script,
      `import { checkOutputPath } from "${root}src/pipeline/model/output_path.ts";
for (const [path, write] of [["${dir}/out/c.ckpt", "replace"], ["${dir}/out/t.json", "direct"], ["${dir}/none/c.ckpt", "replace"], ["${dir}/none/t.json", "direct"]]) {
  try { checkOutputPath(path, "out", { write }); console.log("passed"); }
  catch (e) { console.log(e.constructor.name + ": " + e.message); }
}`,
    );
    await Deno.mkdir(`${dir}/out`);
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--quiet", `--allow-read=${root},${dir}`, script],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(r.stdout).trimEnd().split("\n");
    assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
    assert.deepEqual(out, [
      `TypeError: out ${dir}/out/c.ckpt needs write access to ${dir}/out (run with --allow-write=${dir}/out; the file is written beside it, then renamed over it)`,
      `TypeError: out ${dir}/out/t.json needs write access to ${dir}/out/t.json (run with --allow-write=${dir}/out/t.json, or its folder)`,
      // A missing folder (visible with read access) is said before the permission to add.
      `TypeError: out ${dir}/none/c.ckpt: the folder ${dir}/none does not exist (create it first)`,
      `TypeError: out ${dir}/none/t.json: the folder ${dir}/none does not exist (create it first)`,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkOutputPath: a folder the system does not let this user write into is refused (skipped as root, who may write anywhere)", async () => {
  if (Deno.uid() === 0) {
    console.log("skipped: running as root, the system's folder permissions do not apply");
    return;
  }
  const dir = await Deno.makeTempDir();
  try {
    await Deno.chmod(dir, 0o555);
    for (const write of ["replace", "direct"] as const) {
      assert.throws(() => checkOutputPath(`${dir}/x`, "out", { write }), /the system refuses/);
    }
  } finally {
    await Deno.chmod(dir, 0o755);
    await Deno.remove(dir, { recursive: true });
  }
});
