import assert from "node:assert/strict";
import { Rng } from "../../src/tensor/random.ts";

Deno.test("Rng.state / Rng.fromState: a rebuilt generator continues the same stream (uniform, int, normal with a kept spare)", () => {
  for (const seed of [0, 1, 42, -7, 2 ** 40 + 3]) {
    const a = new Rng(seed);
    for (let i = 0; i < 5; i++) a.next();
    a.normal(); // leaves the second Box–Muller sample as the spare
    const saved = JSON.parse(JSON.stringify(a.state()));
    assert.notEqual(saved.spare, null);
    const b = Rng.fromState(saved);
    assert.deepEqual(b.state(), a.state());
    const draw = (r: Rng) => [r.normal(), r.next(), r.int(1000), r.normal(), r.nextUint32()];
    assert.deepEqual(draw(b), draw(a));
  }
});

Deno.test("Rng.fromState refuses malformed states with the field and the rule", () => {
  const cases: [unknown, RegExp][] = [
    [null, /state must be an object/],
    [{ words: [1, 2, 3], spare: null }, /words must be 4 integers in \[0, 2\^32\), got \[1,2,3\]/],
    [{ words: [1, 2, 3, -1], spare: null }, /words must be 4 integers/],
    [{ words: [1, 2, 3, 2 ** 32], spare: null }, /words must be 4 integers/],
    [{ words: [0, 0, 0, 0], spare: null }, /must not all be zero/],
    [{ words: [1, 2, 3, 4], spare: "x" }, /spare must be null or a finite number, got x/],
  ];
  for (const [state, re] of cases) {
    assert.throws(
      () => Rng.fromState(state as never),
      (e: unknown) => e instanceof TypeError && re.test((e as Error).message),
    );
  }
});
