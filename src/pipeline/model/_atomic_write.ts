// Writing a file so that a crash or a power cut never leaves a torn one
// where the previous one was: the bytes go to `<name>.tmp-XXXXXXXX` beside
// the target (8 hex digits), which is flushed to the disk (fsync) and then
// renamed over the target, and the folder is flushed after the rename so
// that the rename itself survives a power cut. Temporary files of the same
// target left by a save that was killed are removed by the next save. Not
// exported from the package.

/** Where `path`'s folder is and what its last component is called. */
function split(path: string): { dir: string; base: string } {
  const cut = Math.max(
    path.lastIndexOf("/"),
    Deno.build.os === "windows" ? path.lastIndexOf("\\") : -1,
  );
  if (cut < 0) return { dir: ".", base: path };
  return { dir: cut === 0 ? path.slice(0, 1) : path.slice(0, cut), base: path.slice(cut + 1) };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The temporary files of `base`'s saves: `<base>.tmp-` and 8 lowercase hex digits. */
export function tempFilePattern(base: string): RegExp {
  return new RegExp(`^${escapeRegExp(base)}\\.tmp-[0-9a-f]{8}$`);
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
}

/**
 * Removes `dir/name` if it is a temporary file that no live save holds: a
 * save holds an exclusive lock on its temporary file from just after
 * creating it until after its rename, so a lock taken here means its
 * writer is gone (the system drops a killed process's locks), and a file
 * that is still at `name` once locked was never renamed.
 */
async function removeIfStale(dir: string, name: string): Promise<void> {
  const path = `${dir}/${name}`;
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch {
    return; // gone already
  }
  try {
    await file.lock(true);
    const [held, now] = await Promise.all([file.stat(), Deno.lstat(path).catch(() => null)]);
    if (now !== null && now.ino === held.ino && now.dev === held.dev) await Deno.remove(path);
  } catch {
    // Not ours to judge (permissions, a platform without locks): leave it.
  } finally {
    file.close();
  }
}

/**
 * Writes `bytes` to `path` atomically (see the module comment): the
 * temporary file is synced before the rename and the folder after it; then
 * every stale temporary file of the same target (`<name>.tmp-XXXXXXXX`,
 * nothing else) is removed.
 */
export async function writeFileAtomically(path: string, bytes: Uint8Array): Promise<void> {
  const { dir, base } = split(path);
  const tmp = `${path}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  const file = await Deno.open(tmp, { write: true, createNew: true });
  try {
    await file.lock(true);
    await writeAll(file, bytes);
    await file.sync();
    await Deno.rename(tmp, path);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  } finally {
    file.close();
  }
  // The rename is durable once the folder's entry is on the disk.
  try {
    const folder = await Deno.open(dir, { read: true });
    try {
      await folder.sync();
    } finally {
      folder.close();
    }
  } catch {
    // Some systems cannot open or sync a folder (Windows): the rename stands.
  }
  const pattern = tempFilePattern(base);
  const stale: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      if (e.isFile && pattern.test(e.name)) stale.push(e.name);
    }
  } catch {
    return; // the folder cannot be listed: nothing to clean
  }
  for (const name of stale) await removeIfStale(dir, name);
}
