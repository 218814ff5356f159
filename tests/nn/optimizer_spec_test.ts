import assert from "node:assert/strict";
import { AdamW } from "../../src/nn/adamw.ts";
import type { Parameter } from "../../src/nn/layer.ts";
import { SGD } from "../../src/nn/sgd.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import {
  checkOptimizerSpec,
  createOptimizer,
  type OptimizerSpec,
} from "../../src/nn/optimizer_spec.ts";

const be = new CpuBackend();

/** A one-element parameter holding `value` with gradient `grad`. */
function param(name: string, value: number, grad: number): Parameter {
  return {
    name,
    value: be.fromData(new Float32Array([value]), [1]),
    grad: be.fromData(new Float32Array([grad]), [1]),
  };
}

function disposeAll(ps: Parameter[]): void {
  for (const p of ps) {
    p.value.dispose();
    p.grad.dispose();
  }
}

Deno.test("checkOptimizerSpec: bad specs are refused with the value and the rule", () => {
  const cases: [string, unknown, new (...a: never[]) => Error, RegExp][] = [
    ["null", null, TypeError, /optimizer must be an object .*, got null/],
    ["a string", "sgd", TypeError, /optimizer must be an object .*, got "sgd"/],
    ["no kind", { lr: 1 }, TypeError, /optimizer\.kind must be "adamw" or "sgd", got undefined/],
    ["unknown kind", { kind: "adam" }, TypeError, /optimizer\.kind .*, got "adam"/],
    [
      "SGD with an AdamW key",
      { kind: "sgd", beta1: 0.9 },
      TypeError,
      /unknown sgd option "beta1"; known: lr, momentum, weightDecay/,
    ],
    [
      "AdamW with SGD's momentum",
      { kind: "adamw", momentum: 0.9 },
      TypeError,
      /unknown adamw option "momentum"; known: lr, beta1, beta2, eps, weightDecay/,
    ],
    ["negative lr", { kind: "sgd", lr: -0.1 }, RangeError, /SGD: lr of group 0 .* ≥ 0, got -0\.1/],
    [
      "infinite lr",
      { kind: "adamw", lr: Infinity },
      RangeError,
      /AdamW: lr of group 0 .*, got Infinity/,
    ],
    [
      "negative weight decay",
      { kind: "adamw", weightDecay: -1 },
      RangeError,
      /AdamW: weightDecay of group 0 .*, got -1/,
    ],
    [
      "momentum 1",
      { kind: "sgd", momentum: 1 },
      RangeError,
      /SGD: momentum must lie in \[0, 1\), got 1/,
    ],
    [
      "beta1 1",
      { kind: "adamw", beta1: 1 },
      RangeError,
      /AdamW: beta1 must lie in \[0, 1\), got 1/,
    ],
    [
      "beta2 negative",
      { kind: "adamw", beta2: -0.5 },
      RangeError,
      /AdamW: beta2 must lie in \[0, 1\), got -0\.5/,
    ],
    ["eps 0", { kind: "adamw", eps: 0 }, RangeError, /AdamW: eps must be positive, got 0/],
    ["lr a string", { kind: "sgd", lr: "0.1" }, RangeError, /SGD: lr of group 0 .*, got "0\.1"/],
  ];
  for (const [what, spec, type, message] of cases) {
    assert.throws(
      () => checkOptimizerSpec(spec as OptimizerSpec),
      (e: Error) => e instanceof type && message.test(e.message),
      what,
    );
  }
});

Deno.test("checkOptimizerSpec: a good spec comes back as an equal plain copy", () => {
  for (
    const spec of [
      { kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01 },
      { kind: "adamw", lr: 1e-3, beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0 },
      { kind: "sgd" },
    ] as OptimizerSpec[]
  ) {
    const out = checkOptimizerSpec(spec);
    assert.deepEqual(out, spec);
    assert.notEqual(out, spec, "a copy, not the caller's object");
    assert.doesNotThrow(() => structuredClone(out), "it can be posted to a worker");
  }
  assert.equal(be.memory.liveBytes, 0, "checking allocates nothing that stays");
});

Deno.test("createOptimizer: builds the kind asked for, with the given hyper-parameters", () => {
  const ps = [param("a", 1, 1), param("b", 2, 1)];
  const sgd = createOptimizer({ kind: "sgd", lr: 0.25, momentum: 0.5, weightDecay: 0.125 }, ps);
  assert.ok(sgd instanceof SGD);
  assert.equal(sgd.momentum, 0.5);
  assert.equal(sgd.groups.length, 1);
  assert.deepEqual([sgd.groups[0].lr, sgd.groups[0].weightDecay], [0.25, 0.125]);
  assert.deepEqual(sgd.groups[0].params.map((p) => p.name), ["a", "b"]);
  sgd.dispose();

  const adamw = createOptimizer(
    { kind: "adamw", lr: 0.5, beta1: 0.8, beta2: 0.9, eps: 1e-4, weightDecay: 0.25 },
    ps,
  );
  assert.ok(adamw instanceof AdamW);
  assert.deepEqual([adamw.beta1, adamw.beta2, adamw.eps], [0.8, 0.9, 1e-4]);
  assert.deepEqual([adamw.groups[0].lr, adamw.groups[0].weightDecay], [0.5, 0.25]);
  adamw.dispose();

  // Defaults are the optimizers' own (AdamW: lr 1e-3, betas 0.9/0.999, eps 1e-8, decay 0.01).
  const plain = createOptimizer({ kind: "adamw" }, ps) as AdamW;
  assert.deepEqual(
    [plain.beta1, plain.beta2, plain.eps, plain.groups[0].lr, plain.groups[0].weightDecay],
    [0.9, 0.999, 1e-8, 1e-3, 0.01],
  );
  plain.dispose();
  disposeAll(ps);
});

Deno.test("createOptimizer: one step moves the parameters as the hand-computed update says", async () => {
  // SGD, first step (momentum buffer = d): p − lr·(g + λ·p) = 2 − 0.5·(3 + 0.1·2) = 0.4.
  const s = [param("w", 2, 3)];
  const sgd = createOptimizer({ kind: "sgd", lr: 0.5, momentum: 0.9, weightDecay: 0.1 }, s);
  sgd.step();
  assert.ok(Math.abs((await s[0].value.toArray())[0] - 0.4) < 1e-6);
  assert.equal(sgd.stepCount, 1);
  sgd.dispose();
  disposeAll(s);

  // AdamW, first step: bias-corrected moments are g and g², so the step is
  // lr·g/(|g| + eps) plus the decoupled decay lr·λ·p:
  // 2 − 0.1·(−4/(4 + 1e-8)) − 0.1·0.5·2 = 2 + 0.1 − 0.1 = 2.0; and with g = 4: 1.8.
  const a = [param("u", 2, -4), param("v", 2, 4)];
  const adamw = createOptimizer({ kind: "adamw", lr: 0.1, weightDecay: 0.5 }, a);
  adamw.step();
  const [u, v] = await Promise.all(a.map((p) => p.value.toArray()));
  assert.ok(Math.abs(u[0] - 2.0) < 1e-6, `u = ${u[0]}`);
  assert.ok(Math.abs(v[0] - 1.8) < 1e-6, `v = ${v[0]}`);
  adamw.dispose();
  disposeAll(a);
  assert.equal(be.memory.liveBytes, 0);
});

Deno.test("createOptimizer: an unknown kind is a TypeError naming it, before any state", () => {
  const ps = [param("a", 1, 1)];
  assert.throws(
    () => createOptimizer({ kind: "lamb" } as unknown as OptimizerSpec, ps),
    (e: Error) => e instanceof TypeError && /optimizer\.kind .*, got "lamb"/.test(e.message),
  );
  assert.throws(
    () => createOptimizer(undefined as unknown as OptimizerSpec, ps),
    (e: Error) => e instanceof TypeError && /got undefined/.test(e.message),
  );
  disposeAll(ps);
  assert.equal(be.memory.liveBytes, 0);
});
