import assert from "node:assert/strict";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import { Dropout } from "../../src/nn/dropout.ts";
import type { ForwardOptions, Layer } from "../../src/nn/layer.ts";
import { layerFromSpec } from "../../src/nn/layer_registry.ts";
import { Linear } from "../../src/nn/linear.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { checkAgainstCpu, checkSplitEqualsFused, gradCheck, uniform } from "./_layer_checks.ts";

const backends = await testBackends();

/** `layer` with `ctx` added to every forward: a fixed training mask for the generic checks. */
function inTraining(layer: Layer, ctx: ForwardOptions): Layer {
  return new Proxy(layer, {
    get(target, prop) {
      if (prop === "forward") {
        return (x: Tensor, o?: ForwardOptions) => target.forward(x, { ...o, ...ctx });
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

const TRAIN = { training: true, step: 3, rowOffset: 2 };
const make = (be: Backend) => inTraining(new Dropout(be, 0.4, { seed: 11 }), TRAIN);
const input = (be: Backend, seed: number): Tensor => uniform(be, [4, 5], seed, -2, 2);

Deno.test("Dropout: I matches central finite differences with a fixed mask", async () => {
  const worst = await gradCheck(make, input);
  assert.ok(worst < 2e-3, `worst error ${worst}`);
});

Deno.test("Dropout: I then W equals the fused backward bitwise over interleaved micro-batches", async () => {
  await checkSplitEqualsFused(make, input);
});

for (const be of backends) {
  Deno.test(`Dropout: ${label(be)} drops and scales exactly as the CPU (bit for bit)`, async () => {
    await checkAgainstCpu(be, make, input, 0);
  });
}

Deno.test("Dropout in a model: micro-batches with rowOffset give the whole batch's outputs and dx, on every backend", async () => {
  for (const be of backends) {
    const model = new Sequential([
      new Linear(be, 4, 6, { seed: 1 }),
      new ReLU(be),
      new Sequential([new Dropout(be, 0.5, { seed: 7 })]), // nested: the context must reach it
      new Linear(be, 6, 3, { seed: 2 }),
    ]);
    const x = uniform(be, [8, 4], 5);
    const dy = uniform(be, [8, 3], 6);
    const step = 12;
    const whole = model.forward(x, { key: "all", training: true, step });
    const dxWhole = model.backward(dy, "all");
    const ys: number[] = [], dxs: number[] = [];
    for (const [start, end] of [[0, 3], [3, 4], [4, 8]]) {
      const key = `mb${start}`;
      const opts = { key, training: true, step, rowOffset: start };
      ys.push(...await model.forward(ops.sliceRows(x, start, end), opts).toArray());
      dxs.push(...await model.backward(ops.sliceRows(dy, start, end), key).toArray());
    }
    assert.deepEqual(ys, [...await whole.toArray()], `${label(be)}: y`);
    assert.deepEqual(dxs, [...await dxWhole.toArray()], `${label(be)}: dx`);
    // Something was dropped: a different step gives a different output.
    const other = await model.forward(x, { save: false, training: true, step: step + 1 }).toArray();
    assert.notDeepEqual([...other], [...await whole.toArray()]);
    model.dispose();
  }
});

Deno.test("Dropout: identity unless training (prediction, evaluation, p = 0); the mask follows seed and step", async () => {
  const be = new CpuBackend();
  const x = ops.ones(be, [6, 5]);
  const d = new Dropout(be, 0.5, { seed: 1 });
  for (const o of [{}, { training: false, step: 3 }, { save: false }]) {
    assert.deepEqual([...await d.forward(x, { ...o, key: "k" }).toArray()], new Array(30).fill(1));
    d.dropState("k");
  }
  const zero = new Dropout(be, 0);
  assert.deepEqual(
    [...await zero.forward(x, { save: false, ...TRAIN }).toArray()],
    new Array(30).fill(1),
  );
  const at = async (
    seed: number,
    step: number,
  ) => [
    ...await new Dropout(be, 0.5, { seed }).forward(x, { save: false, training: true, step })
      .toArray(),
  ];
  assert.deepEqual(await at(1, 1), await at(1, 1));
  assert.notDeepEqual(await at(1, 1), await at(1, 2));
  assert.notDeepEqual(await at(1, 1), await at(2, 1));
  // The spec rebuilds the same masks (a pipeline worker's copy drops alike).
  const copy = layerFromSpec(JSON.parse(JSON.stringify(d.spec())), be);
  const o = { save: false, training: true, step: 4, rowOffset: 9 };
  assert.deepEqual([...await copy.forward(x, o).toArray()], [...await d.forward(x, o).toArray()]);
});

Deno.test("Dropout and forward options: bad values are named before any work", () => {
  const be = new CpuBackend();
  assertThrowsWith(() => new Dropout(be, 1), RangeError, ["Dropout", "p", "[0, 1)", "1"]);
  assertThrowsWith(() => new Dropout(be, 0.5, { seed: -1 }), RangeError, ["seed", "-1"]);
  const d = new Dropout(be, 0.5);
  const x = be.zeros([2, 3]);
  assertThrowsWith(() => d.forward(x, { training: true }), TypeError, ["Dropout", "step"]);
  assert.deepEqual(d.heldKeys(), [], "a refused forward keeps nothing");
  const relu = new ReLU(be);
  const model = new Sequential([relu]);
  for (const l of [relu, model] as Layer[]) {
    assertThrowsWith(() => l.forward(x, { training: "yes" as unknown as boolean }), TypeError, [
      "training",
      "yes",
    ]);
    assertThrowsWith(() => l.forward(x, { step: -1 }), RangeError, ["step", "-1"]);
    assertThrowsWith(() => l.forward(x, { step: 2 ** 32 }), RangeError, ["step", "4294967296"]);
    assertThrowsWith(() => l.forward(x, { rowOffset: 1.5 }), RangeError, ["rowOffset", "1.5"]);
    assert.deepEqual(l.heldKeys(), []);
  }
});
