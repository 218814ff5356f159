import assert from "node:assert/strict";
import { makeTag, type TagSpace } from "../../../src/pipeline/comm/tag.ts";

Deno.test("makeTag: every (space, iteration, chunk, microBatch) on a grid gets its own tag", () => {
  const seen = new Map<string, string>();
  for (const space of ["activation", "gradient"] as TagSpace[]) {
    for (let iteration = 0; iteration < 12; iteration++) {
      for (let chunk = 0; chunk < 12; chunk++) {
        for (let microBatch = 0; microBatch < 12; microBatch++) {
          const tag = makeTag({ space, microBatch, chunk, iteration });
          const who = `${space}/${iteration}/${chunk}/${microBatch}`;
          assert.equal(seen.get(tag), undefined, `${who} collides with ${seen.get(tag)}`);
          seen.set(tag, who);
        }
      }
    }
  }
  assert.equal(seen.size, 2 * 12 ** 3);
});

Deno.test("makeTag: activation and gradient tags of the same numbers differ", () => {
  const f = { microBatch: 3, chunk: 1, iteration: 7 };
  assert.notEqual(
    makeTag({ space: "activation", ...f }),
    makeTag({ space: "gradient", ...f }),
  );
});

Deno.test("makeTag: bad fields are refused with the value named", () => {
  assert.throws(
    () => makeTag({ space: "weights" as TagSpace, microBatch: 0, chunk: 0, iteration: 0 }),
    (e: Error) => e instanceof TypeError && /"weights"/.test(e.message),
  );
  assert.throws(
    () => makeTag({ space: "activation", microBatch: -1, chunk: 0, iteration: 0 }),
    (e: Error) => e instanceof RangeError && /microBatch .* got -1/.test(e.message),
  );
  assert.throws(
    () => makeTag({ space: "gradient", microBatch: 0, chunk: 1.5, iteration: 0 }),
    (e: Error) => e instanceof RangeError && /chunk .* got 1.5/.test(e.message),
  );
  assert.throws(
    () => makeTag({ space: "gradient", microBatch: 0, chunk: 0, iteration: NaN }),
    (e: Error) => e instanceof RangeError && /iteration .* got NaN/.test(e.message),
  );
});
