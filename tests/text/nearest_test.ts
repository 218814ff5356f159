// src/text/nearest.ts: the edit distance by its definition, and which
// candidate counts as near for a "did you mean" hint.

import assert from "node:assert/strict";
import { checkOptionSpelling, editDistance, nearestName } from "../../src/text/nearest.ts";

Deno.test("editDistance: insertions, deletions and substitutions, one each", () => {
  assert.equal(editDistance("", ""), 0);
  assert.equal(editDistance("", "abc"), 3);
  assert.equal(editDistance("abc", ""), 3);
  assert.equal(editDistance("kitten", "sitting"), 3); // k→s, e→i, +g
  assert.equal(editDistance("zbv", "zb-v"), 1);
  assert.equal(editDistance("1fb1", "1f1b"), 2); // a swap is two edits
  for (const [a, b] of [["gpipe", "gpipe-lifo"], ["zb-h1", "zb-h2"], ["abc", "cab"]]) {
    assert.equal(editDistance(a, b), editDistance(b, a), `${a} ${b}`);
  }
});

Deno.test("nearestName: within max(2, a third of the word) edits, ignoring case; ties to the earlier", () => {
  assert.equal(nearestName("ZB-V", ["zb-v"]), "zb-v");
  assert.equal(nearestName("zbh1", ["zb-h1", "zb-h2"]), "zb-h1");
  assert.equal(nearestName("zb-h3", ["zb-h1", "zb-h2"]), "zb-h1"); // tie: the earlier
  assert.equal(nearestName("ab", ["xyz"]), undefined); // 3 edits > 2
  assert.equal(nearestName("abcdefghi", ["abcxyzghi"]), "abcxyzghi"); // 3 edits = 9 / 3
  assert.equal(nearestName("abcdefghi", ["axxxxfghi"]), undefined); // 4 edits
  assert.equal(nearestName("x", []), undefined);
});

Deno.test("checkOptionSpelling: a key near a known option that is not given is refused; known and unrelated keys pass", () => {
  const known = ["ranks", "microBatches", "costs"];
  checkOptionSpelling({ ranks: 2, microBatches: 4 }, known);
  checkOptionSpelling({ ranks: 2, label: "run 1" }, known); // unrelated: left alone
  checkOptionSpelling({ ranks: 2, rank: 0 }, known); // near ranks, but ranks is given
  assert.throws(
    () => checkOptionSpelling({ microbatches: 4 }, known, "f: "),
    (e: unknown) =>
      e instanceof TypeError &&
      e.message === "f: unknown option microbatches: did you mean microBatches?",
  );
  assert.throws(
    () => checkOptionSpelling({ cost: {} }, known),
    /unknown option cost: did you mean costs\?/,
  );
});
