/**
 * `buildRanks`'s check before any rank starts: a CPU rank whose parameters,
 * gradients, optimizer state and step-check copies pass the 4 GiB of its
 * WebAssembly memory is refused, naming the limit and the way out.
 */

import assert from "node:assert/strict";
import { checkCpuMemory } from "../../../src/pipeline/model/build.ts";
import type { ModelPlan } from "../../../src/pipeline/model/plan.ts";

function plan(...bytes: number[]): Pick<ModelPlan, "weights"> {
  return { weights: bytes.map((b) => ({ byteLength: b }) as Uint8Array) };
}

Deno.test("a CPU rank whose parameter state passes 4 GiB is refused before any work, naming rank and limit", () => {
  const adamw = { kind: "adamw", lr: 1e-3 } as const;
  // AdamW with the step check: 7 copies (weights, gradients, 2 states, and
  // the check's copies of weights and states).
  const policy = { nonFinite: "skip" } as const;
  assert.doesNotThrow(() => checkCpuMemory({ optimizer: adamw, policy }, plan(600e6, 10e6)));
  assert.throws(
    () => checkCpuMemory({ optimizer: adamw, policy }, plan(10e6, 620e6)),
    (e: Error) => {
      assert.ok(e instanceof RangeError);
      assert.match(e.message, /^rank 1's parameters need 4\.0 GiB/);
      assert.match(e.message, /7 copies/);
      assert.match(e.message, /more than the 4 GiB a CPU rank's memory holds/);
      assert.match(e.message, /use more ranks/);
      return true;
    },
  );
  // Without the check's copies, and with plain SGD, the same weights fit.
  const off = { nonFinite: "off" } as const;
  assert.doesNotThrow(() => checkCpuMemory({ optimizer: adamw, policy: off }, plan(10e6, 620e6)));
  const sgd = { kind: "sgd", lr: 0.1 } as const;
  assert.doesNotThrow(() => checkCpuMemory({ optimizer: sgd, policy }, plan(10e6, 1000e6)));
});
