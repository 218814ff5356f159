import assert from "node:assert/strict";
import {
  isStateKeyOf,
  isTensorTagOf,
  isVerdictTagOf,
  makeTag,
  stateKey,
  type TagSpace,
  verdictTag,
} from "../../../src/pipeline/runtime/tag.ts";

Deno.test("makeTag: every (space, iteration, stage, microBatch) on a grid gets its own tag", () => {
  const seen = new Map<string, string>();
  for (const space of ["activation", "gradient"] as TagSpace[]) {
    for (let iteration = 0; iteration < 12; iteration++) {
      for (let stage = 0; stage < 12; stage++) {
        for (let microBatch = 0; microBatch < 12; microBatch++) {
          const tag = makeTag({ space, microBatch, stage, iteration });
          const who = `${space}/${iteration}/${stage}/${microBatch}`;
          assert.equal(seen.get(tag), undefined, `${who} collides with ${seen.get(tag)}`);
          seen.set(tag, who);
        }
      }
    }
  }
  assert.equal(seen.size, 2 * 12 ** 3);
});

Deno.test("makeTag: activation and gradient tags of the same numbers differ", () => {
  const f = { microBatch: 3, stage: 1, iteration: 7 };
  assert.notEqual(
    makeTag({ space: "activation", ...f }),
    makeTag({ space: "gradient", ...f }),
  );
});

Deno.test("makeTag: bad fields are refused with the value named", () => {
  assert.throws(
    () => makeTag({ space: "weights" as TagSpace, microBatch: 0, stage: 0, iteration: 0 }),
    (e: Error) => e instanceof TypeError && /"weights"/.test(e.message),
  );
  assert.throws(
    () => makeTag({ space: "activation", microBatch: -1, stage: 0, iteration: 0 }),
    (e: Error) => e instanceof RangeError && /microBatch .* got -1/.test(e.message),
  );
  assert.throws(
    () => makeTag({ space: "gradient", microBatch: 0, stage: 1.5, iteration: 0 }),
    (e: Error) => e instanceof RangeError && /stage .* got 1.5/.test(e.message),
  );
  assert.throws(
    () => makeTag({ space: "gradient", microBatch: 0, stage: 0, iteration: NaN }),
    (e: Error) => e instanceof RangeError && /iteration .* got NaN/.test(e.message),
  );
});

// The wire format is shared by every rank of a run (threads, processes, MPI
// programs): these strings are what goes on the wire and must not change.
Deno.test("tags: the wire format of tensor and verdict tags and of state keys", () => {
  assert.equal(
    makeTag({ space: "activation", microBatch: 3, stage: 1, iteration: 0 }),
    "act/i0/c1/m3",
  );
  assert.equal(
    makeTag({ space: "gradient", microBatch: 0, stage: 2, iteration: 12, attempt: 0 }),
    "grad/i12/c2/m0",
  );
  assert.equal(
    makeTag({ space: "activation", microBatch: 5, stage: 0, iteration: 3, attempt: 2 }),
    "act/i3a2/c0/m5",
  );
  assert.equal(verdictTag(4, 1), "verdict/i4/s1");
  assert.equal(stateKey(2, 5), "i2m5");
});

Deno.test("tags: an attempt's matcher takes both spaces of that attempt and nothing else", () => {
  const tags = [];
  for (const space of ["activation", "gradient"] as TagSpace[]) {
    for (const iteration of [1, 10, 11]) {
      for (const attempt of [0, 1]) {
        tags.push({
          tag: makeTag({ space, microBatch: 0, stage: 1, iteration, attempt }),
          iteration,
          attempt,
        });
      }
    }
  }
  for (const t of tags) {
    for (const iteration of [1, 10, 11]) {
      for (const attempt of [0, 1]) {
        const want = t.iteration === iteration && t.attempt === attempt;
        assert.equal(
          isTensorTagOf(t.tag, iteration, attempt),
          want,
          `${t.tag} vs i${iteration}a${attempt}`,
        );
      }
    }
    assert.equal(isVerdictTagOf(t.tag, t.iteration), false, `${t.tag} is no verdict`);
  }
  assert.equal(isTensorTagOf(verdictTag(1, 0), 1, 0), false);
  assert.equal(isVerdictTagOf(verdictTag(1, 3), 1), true);
  assert.equal(isVerdictTagOf(verdictTag(10, 3), 1), false);
  assert.equal(isStateKeyOf(stateKey(1, 4), 1), true);
  assert.equal(isStateKeyOf(`${stateKey(1, 4)}/2`, 1), true, "an id that starts with the key");
  assert.equal(isStateKeyOf(stateKey(10, 4), 1), false);
  assert.equal(isStateKeyOf(stateKey(1, 4), 10), false);
});
