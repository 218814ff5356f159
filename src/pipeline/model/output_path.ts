/**
 * Checking a file that a training run will write, before the run starts:
 * the folder exists, the path is not a folder, Deno's permissions and the
 * system's allow the write. A run then never trains for an hour to fail
 * at its last line.
 *
 * @module
 */

import { checkOptionsObject } from "../../text/nearest.ts";
import { filePath } from "./_file_path.ts";
import { describeValue } from "../../text/describe.ts";

/** How {@linkcode checkOutputPath} will see the file written. */
export interface OutputPathOptions {
  /**
   * `"replace"` (default): written through a temporary file beside it,
   * renamed over it (checkpoints, pictures): needs read and write permission
   * for the folder. `"direct"`: opened and written in place (traces, logs):
   * needs write permission for the file alone.
   */
  readonly write?: "replace" | "direct";
}

/** The folder of `path` ("." for a bare name). */
function folderOf(path: string): string {
  const cut = Math.max(
    path.lastIndexOf("/"),
    Deno.build.os === "windows" ? path.lastIndexOf("\\") : -1,
  );
  return cut < 0 ? "." : cut === 0 ? path.slice(0, 1) : path.slice(0, cut);
}

function ask(name: "read" | "write", path: string): boolean {
  const q = Deno.permissions.querySync({ name, path });
  if (q.state === "granted") return true;
  // A prompt on a terminal, as the write itself would ask; denied otherwise.
  return q.state === "prompt" && Deno.permissions.requestSync({ name, path }).state === "granted";
}

/**
 * Checks that `path` (a path or a `file:` URL) can be written and returns
 * its local path; `where` names it in errors (e.g. `"--save-checkpoint"`).
 * Throws a TypeError naming the path and the rule when the path is empty or
 * not a file URL, its folder does not exist or is not a folder, the path is
 * a folder, Deno's permissions do not allow the write (naming the flag to
 * add: `--allow-write=…`, and `--allow-read=…` for a replaced file), or
 * the system refuses it. It writes nothing that stays: a probe file it
 * creates is removed at once.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkOutputPath } from "@conveyor/core/callbacks";
 * const dir = await Deno.makeTempDir();
 * assert.equal(checkOutputPath(`${dir}/run.ckpt`, "checkpoint"), `${dir}/run.ckpt`);
 * assert.throws(() => checkOutputPath(`${dir}/none/run.ckpt`, "checkpoint"), /does not exist/);
 * assert.throws(() => checkOutputPath(dir, "checkpoint"), /is a directory/);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function checkOutputPath(
  path: string | URL,
  where: string,
  options: OutputPathOptions = {},
): string {
  const file = filePath(path, where);
  checkOptionsObject(options, ["write"], "checkOutputPath: ");
  const mode = options.write ?? "replace";
  if (mode !== "replace" && mode !== "direct") {
    throw new TypeError(`write must be "replace" or "direct", got ${describeValue(mode)}`);
  }
  const dir = folderOf(file);
  const at = `${where} ${file}`;
  const refuse = (rule: string): never => {
    throw new TypeError(`${at}: ${rule}`);
  };
  // A missing folder is said first where it can be seen (read access to
  // it, granted already: no prompt): a permission to add would only lead to
  // this error next.
  if (Deno.permissions.querySync({ name: "read", path: dir }).state === "granted") {
    try {
      Deno.statSync(dir);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) {
        refuse(`the folder ${dir} does not exist (create it first)`);
      }
    }
  }
  if (mode === "replace") {
    for (const name of ["read", "write"] as const) {
      if (!ask(name, dir)) {
        throw new TypeError(
          `${at} needs ${name} access to ${dir} (run with --allow-${name}=${dir}; the file is ` +
            "written beside it, then renamed over it)",
        );
      }
    }
    let folder: Deno.FileInfo;
    try {
      folder = Deno.statSync(dir);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) {
        refuse(`the folder ${dir} does not exist (create it first)`);
      }
      throw refuse(`the folder ${dir} cannot be read: ${(e as Error).message}`);
    }
    if (!folder.isDirectory) refuse(`${dir} is not a folder`);
    try {
      if (Deno.statSync(file).isDirectory) refuse("it is a directory: name a file to write");
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    // A probe named as the atomic writer's temporary files (a killed check leaves one the
    // next save removes).
    const probe = `${file}.tmp-${crypto.randomUUID().slice(0, 8)}`;
    try {
      Deno.openSync(probe, { write: true, createNew: true }).close();
    } catch (e) {
      refuse(`the system refuses to create a file in ${dir}: ${(e as Error).message}`);
    }
    Deno.removeSync(probe);
    return file;
  }
  if (!ask("write", file)) {
    throw new TypeError(
      `${at} needs write access to ${file} (run with --allow-write=${file}, or its folder)`,
    );
  }
  try {
    Deno.openSync(file, { write: true, createNew: true }).close();
    Deno.removeSync(file);
    return file;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) {
      refuse(`the folder ${dir} does not exist (create it first)`);
    }
    if (!(e instanceof Deno.errors.AlreadyExists)) {
      refuse(`the system refuses to create it: ${(e as Error).message}`);
    }
  }
  // It exists: a file that opens for writing (nothing is truncated here).
  try {
    Deno.openSync(file, { write: true }).close();
  } catch (e) {
    if (e instanceof Deno.errors.IsADirectory) refuse("it is a directory: name a file to write");
    refuse(`the system refuses to write it: ${(e as Error).message}`);
  }
  return file;
}
