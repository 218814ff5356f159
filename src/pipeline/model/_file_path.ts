// The local path a path argument names: a string as it is, a `file:` URL
// decoded as a file URL (percent-decoding, as `@std/path`'s `fromFileUrl`),
// any other URL refused. Used by the model's file readers and writers; not
// exported from the package.

import { fileURLToPath } from "node:url";
import { describeValue } from "../../text/describe.ts";

/**
 * The local path of `path` (`where` names the argument in errors): a
 * non-empty string as it is; a `file:` URL decoded (`my%20run.ckpt` is
 * `my run.ckpt`). Throws a TypeError naming the value and the rule for an
 * empty string, another scheme (`https:`, `data:`, …), a file URL with a
 * remote host or an encoded `/`, or anything else.
 */
export function filePath(path: string | URL, where: string): string {
  if (typeof path === "string") {
    if (path !== "") return path;
    throw new TypeError(`${where} must be a non-empty path or a file: URL, got an empty string`);
  }
  if (!(path instanceof URL)) {
    throw new TypeError(`${where} must be a path or a file: URL, got ${describeValue(path)}`);
  }
  if (path.protocol !== "file:") {
    throw new TypeError(
      `${where} must be a path or a file: URL, got ${
        describeValue(path.href)
      }: only file: URLs name a local ` +
        `file (not ${path.protocol})`,
    );
  }
  try {
    return fileURLToPath(path);
  } catch (e) {
    throw new TypeError(
      `${where}: the file URL ${path.href} names no local path: ${(e as Error).message}`,
      { cause: e },
    );
  }
}
