import assert from "node:assert/strict";
import {
  ActivationCheckpointConfig,
  type ActivationCheckpointOptions,
} from "../../../src/pipeline/checkpoint/checkpoint.ts";

const make = (o: unknown) => new ActivationCheckpointConfig(o as ActivationCheckpointOptions);

Deno.test("defaults: checkpointing off", () => {
  const c = new ActivationCheckpointConfig();
  assert.equal(c.enabled, false);
  assert.equal(c.recompute, "none");
  assert.equal(c.everyNLayers, 1);
  assert.equal(c.maxActivationsInMemory, 0);
  assert.equal(c.checkpointFirstLayer, true);
  assert.ok(Object.isFrozen(c));
  assert.deepEqual(ActivationCheckpointConfig.disabled(), c);
});

Deno.test("enabled implies full recompute; a policy implies enabled", () => {
  const a = new ActivationCheckpointConfig({ enabled: true });
  assert.equal(a.recompute, "full");
  const b = new ActivationCheckpointConfig({ recompute: "selective" });
  assert.equal(b.enabled, true);
  const c = new ActivationCheckpointConfig({ recompute: "none" });
  assert.equal(c.enabled, false);
  const d = new ActivationCheckpointConfig({
    enabled: true,
    everyNLayers: 8,
    maxActivationsInMemory: 4,
    recompute: "full",
    checkpointFirstLayer: false,
  });
  assert.deepEqual(
    [d.enabled, d.everyNLayers, d.maxActivationsInMemory, d.recompute, d.checkpointFirstLayer],
    [true, 8, 4, "full", false],
  );
});

Deno.test("invalid everyNLayers is a RangeError with the value", () => {
  for (const bad of [0, -2, 1.5, NaN, Infinity, "3"]) {
    assert.throws(
      () => make({ enabled: true, everyNLayers: bad }),
      (e: Error) =>
        e instanceof RangeError &&
        e.message ===
          `everyNLayers must be an integer >= 1, got ${
            typeof bad === "string" ? JSON.stringify(bad) : bad
          }`,
    );
  }
});

Deno.test("invalid maxActivationsInMemory is a RangeError with the value", () => {
  for (const bad of [-1, 0.5, NaN, "4"]) {
    assert.throws(
      () => make({ maxActivationsInMemory: bad }),
      (e: Error) =>
        e instanceof RangeError &&
        e.message ===
          `maxActivationsInMemory must be an integer >= 0, got ${
            typeof bad === "string" ? JSON.stringify(bad) : bad
          }`,
    );
  }
  assert.equal(make({ maxActivationsInMemory: 0 }).maxActivationsInMemory, 0);
});

Deno.test("invalid recompute is a RangeError with the value", () => {
  for (const bad of ["partial", "", 1, null]) {
    assert.throws(
      () => make({ recompute: bad }),
      (e: Error) =>
        e instanceof RangeError &&
        e.message === `recompute must be "none", "selective" or "full", got ${JSON.stringify(bad)}`,
    );
  }
});

Deno.test("non-boolean enabled / checkpointFirstLayer is a TypeError with the value", () => {
  assert.throws(
    () => make({ enabled: "yes" }),
    (e: Error) => e instanceof TypeError && e.message === 'enabled must be a boolean, got "yes"',
  );
  assert.throws(
    () => make({ enabled: true, checkpointFirstLayer: 1 }),
    (e: Error) =>
      e instanceof TypeError && e.message === "checkpointFirstLayer must be a boolean, got 1",
  );
});

Deno.test("contradictions, unknown options and bad kinds are refused at construction", () => {
  assert.throws(
    () => make({ enabled: true, recompute: "none" }),
    (e: Error) =>
      e instanceof RangeError && /recompute "none" contradicts enabled: true/.test(e.message),
  );
  assert.throws(
    () => make({ enabled: false, recompute: "full" }),
    (e: Error) =>
      e instanceof RangeError && /recompute "full" contradicts enabled: false/.test(e.message),
  );
  assert.throws(
    () => make({ enabled: true, everyNLayer: 4 }),
    (e: Error) =>
      e instanceof TypeError && /unknown checkpoint option "everyNLayer"/.test(e.message),
  );
  assert.throws(
    () => make({ recompute: "selective", expensiveKinds: "[" }),
    (e: Error) =>
      e instanceof TypeError &&
      /expensiveKinds must be a valid regular expression, got "\["/.test(e.message),
  );
  assert.throws(
    () => make({ expensiveKinds: 3 }),
    (e: Error) =>
      e instanceof TypeError &&
      /expensiveKinds must be a string or a RegExp, got 3/.test(e.message),
  );
  assert.throws(
    () => make(null),
    (e: Error) => e instanceof TypeError && /options must be an object, got null/.test(e.message),
  );
});

Deno.test("plan: full recompute segments every N layers", () => {
  const kinds = new Array(8).fill("Linear");
  const c = new ActivationCheckpointConfig({ enabled: true, everyNLayers: 3 });
  const p = c.plan(kinds);
  assert.deepEqual(p.segments, [{ start: 0, end: 3 }, { start: 3, end: 6 }, { start: 6, end: 8 }]);
  assert.deepEqual(p.keep, new Array(8).fill(false));
  assert.deepEqual(p.keepOutput, new Array(8).fill(false));
});

Deno.test("plan: checkpointFirstLayer false keeps layer 0 and starts segments at 1", () => {
  const c = new ActivationCheckpointConfig({
    enabled: true,
    everyNLayers: 3,
    checkpointFirstLayer: false,
  });
  const p = c.plan(["Embedding", "GELU", "GELU", "GELU", "GELU", "GELU", "GELU", "GELU"]);
  assert.deepEqual(p.segments, [{ start: 1, end: 4 }, { start: 4, end: 7 }, { start: 7, end: 8 }]);
  assert.deepEqual(p.keep, [true, false, false, false, false, false, false, false]);
  assert.deepEqual(c.plan(["Embedding"]).segments, []);
});

Deno.test("plan: disabled keeps everything", () => {
  const p = ActivationCheckpointConfig.disabled().plan(["Linear", "GELU", "Linear"]);
  assert.deepEqual(p.segments, []);
  assert.deepEqual(p.keep, [true, true, true]);
});

Deno.test("plan: selective keeps matmul-heavy layers and their outputs, recomputes the cheap", () => {
  const c = new ActivationCheckpointConfig({ recompute: "selective", everyNLayers: 4 });
  const kinds = ["Linear", "GELU", "LayerNorm", "CausalSelfAttention", "Linear", "Linear", "Tanh"];
  const p = c.plan(kinds);
  assert.deepEqual(p.segments, [{ start: 0, end: 4 }, { start: 4, end: 7 }]);
  assert.deepEqual(p.keep, [true, false, false, true, true, true, false]);
  // Layer 0 feeds the recomputed GELU; layer 5 feeds Tanh; layer 3 ends its segment.
  assert.deepEqual(p.keepOutput, [true, false, false, false, false, true, false]);
  // A segment of expensive layers only has nothing to recompute and is dropped.
  const q = c.plan(["Linear", "Linear", "ReLU"]);
  assert.deepEqual(
    new ActivationCheckpointConfig({ recompute: "selective", everyNLayers: 2 })
      .plan(["Linear", "Linear", "ReLU"]).segments,
    [{ start: 2, end: 3 }],
  );
  assert.deepEqual(q.segments, [{ start: 0, end: 3 }]);
  // Custom kinds.
  const custom = new ActivationCheckpointConfig({
    recompute: "selective",
    expensiveKinds: "^gelu$",
  });
  assert.deepEqual(custom.plan(["Linear", "GELU"]).keep, [false, true]);
  assert.equal(custom.isExpensive("Linear"), false);
});
