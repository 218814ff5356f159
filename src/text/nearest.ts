/**
 * The nearest of some known names to a mistyped one, for "did you mean"
 * hints in error messages. Plain string arithmetic: this folder imports
 * nothing, and any floor may import it.
 *
 * @module
 */

import { describeValue } from "./describe.ts";

/**
 * The Levenshtein distance between two strings: the fewest insertions,
 * deletions and substitutions of one character that turn `a` into `b`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { editDistance } from "./nearest.ts";
 * assert.equal(editDistance("1fb1", "1f1b"), 2);
 * assert.equal(editDistance("zbv", "zb-v"), 1);
 * ```
 */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length];
}

/**
 * The candidate nearest to `word` by edit distance, ignoring case, if it is
 * at most 2 edits away or a third of the word's length (whichever is more);
 * else undefined. Ties go to the earlier candidate.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nearestName } from "./nearest.ts";
 * assert.equal(nearestName("ZBV", ["gpipe", "zb-v", "zb-h1"]), "zb-v");
 * assert.equal(nearestName("pipedream", ["gpipe", "1f1b"]), undefined);
 * ```
 */
export function nearestName(word: string, candidates: readonly string[]): string | undefined {
  const w = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(w, c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * Refuses a key of `options` that is a misspelling of one of `known` (a
 * TypeError naming both: "unknown option microbatches: did you mean
 * microBatches?"), where the option it resembles is not given too: read as
 * absent, a misspelt option would be silently ignored or reported as a
 * missing value. Other keys are left alone (callers may pass a wider object).
 *
 * @param options The options object as given.
 * @param known The option names the callee reads.
 * @param where Prefixes the message (e.g. "ProgressBar: ").
 * @throws {TypeError} On the first misspelt key.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkOptionSpelling } from "./nearest.ts";
 * checkOptionSpelling({ ranks: 2, tag: "mine" }, ["ranks", "microBatches"]); // fine
 * assert.throws(
 *   () => checkOptionSpelling({ microbatches: 4 }, ["ranks", "microBatches"]),
 *   /unknown option microbatches: did you mean microBatches\?/,
 * );
 * ```
 */
export function checkOptionSpelling(
  options: object,
  known: readonly string[],
  where = "",
): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = nearestName(key, known);
    if (near !== undefined && !(near in options)) {
      throw new TypeError(`${where}unknown option ${key}: did you mean ${near}?`);
    }
  }
}

/**
 * `"; did you mean <name>?"` for the name of `known` nearest to `word`, or
 * `""` when none is near: the tail of an "unknown option" message.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { didYouMean } from "./nearest.ts";
 * assert.equal(didYouMean("bta1", ["kind", "lr", "beta1"]), "; did you mean beta1?");
 * assert.equal(didYouMean("colour", ["kind", "lr"]), "");
 * ```
 */
export function didYouMean(word: string, known: readonly string[]): string {
  const near = nearestName(word, known);
  return near === undefined ? "" : `; did you mean ${near}?`;
}

/**
 * {@linkcode checkOptionSpelling} for an options object that must be an
 * object: a TypeError naming what was given otherwise.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkOptionsObject } from "./nearest.ts";
 * checkOptionsObject({ width: 300 }, ["width"], "renderSvg: ");
 * assert.throws(() => checkOptionsObject(3, ["width"], "renderSvg: "), /options must be an object, got 3/);
 * assert.throws(() => checkOptionsObject({ widht: 1 }, ["width"]), /did you mean width\?/);
 * ```
 */
export function checkOptionsObject(options: unknown, known: readonly string[], where = ""): void {
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError(`${where}options must be an object, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, known, where);
}
