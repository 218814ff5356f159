/**
 * Which picture a trace path gets: an SVG timeline for a name ending in
 * `.svg`, else a Chrome trace (JSON, opens in Perfetto). A name ending in
 * another picture's extension (`.png`, `.jpg`, `.pdf`, …) is refused rather
 * than filled with JSON.
 *
 * @module
 */

/** The formats a trace is written in. */
export type TraceFormat = "svg" | "chrome-trace";

// Extensions of formats no trace is written in, that a user may try.
const OTHER_PICTURES = [".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".pdf", ".html", ".htm"];

/**
 * The format `path` is written in: `"svg"` for a name ending in `.svg`
 * (any case), else `"chrome-trace"`.
 *
 * @param path The file's path.
 * @param where Names the path in the error (e.g. `"--trace"`).
 * @returns The format.
 * @throws {TypeError} For a name ending in another picture's extension.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { traceFormat } from "./trace_format.ts";
 * assert.equal(traceFormat("step.svg", "trace"), "svg");
 * assert.equal(traceFormat("step.json", "trace"), "chrome-trace");
 * assert.throws(() => traceFormat("step.png", "trace"), /ending in \.svg\) or a Chrome trace/);
 * ```
 */
export function traceFormat(path: string, where: string): TraceFormat {
  const lower = path.toLowerCase();
  if (lower.endsWith(".svg")) return "svg";
  const other = OTHER_PICTURES.find((e) => lower.endsWith(e));
  if (other !== undefined) {
    throw new TypeError(
      `${where} ${path}: a trace is an SVG timeline (a name ending in .svg) or a Chrome trace ` +
        `(JSON, any other name such as .json), not ${other.slice(1).toUpperCase()}`,
    );
  }
  return "chrome-trace";
}
